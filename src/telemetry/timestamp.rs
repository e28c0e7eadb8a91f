//! The log line's timestamp, `2026-12-04T01:02:03.456789Z`: the text tracing-subscriber's default timer writes,
//! without going through `fmt`.
//!
//! Why it exists (the CPU a log line costs): through `Display`, `{:02}` padding and serde_json's string adapter that
//! timer cost ~3,100 instructions per line, the largest part of the JSON line left once span fields stopped being
//! re-parsed. Digits written straight into a fixed array cost a few hundred.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC, microseconds truncated as tracing-subscriber truncates them.
pub(super) type Text = [u8; 27];

/// The text of `at`; `None` before 1970 or after 9999, which tracing-subscriber writes with a sign or a fifth
/// digit: the caller hands those to it.
pub(super) fn utc_micros(at: SystemTime) -> Option<Text> {
    let since_epoch = at.duration_since(UNIX_EPOCH).ok()?;
    let seconds = since_epoch.as_secs();
    let (year, month, day) = civil_from_days(seconds / 86_400);
    if year > 9999 {
        return None;
    }
    let of_day = seconds % 86_400;
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    // Every value fits its width: `year` was checked, the rest are bounded by the calendar and the clock.
    digits(&mut text[0..4], year);
    digits(&mut text[5..7], month);
    digits(&mut text[8..10], day);
    digits(&mut text[11..13], of_day / 3600);
    digits(&mut text[14..16], of_day / 60 % 60);
    digits(&mut text[17..19], of_day % 60);
    digits(&mut text[20..26], u64::from(since_epoch.subsec_micros()));
    Some(text)
}

/// Fills `slot` with the last `slot.len()` decimal digits of `value`, zero-padded.
fn digits(slot: &mut [u8], mut value: u64) {
    for place in slot.iter_mut().rev() {
        *place = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Year, month and day of the `days`-th day after 1970-01-01 in the proleptic Gregorian calendar: Howard
/// Hinnant's `civil_from_days`, in unsigned arithmetic since no day here precedes 1970.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Days since 0000-03-01, so that the leap day ends each 400-year era's years.
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::time::FormatTime;

    use super::utc_micros;

    fn text(at: SystemTime) -> String {
        String::from_utf8(utc_micros(at).expect("in range").to_vec()).expect("ASCII")
    }

    fn by_chrono(at: SystemTime) -> String {
        chrono::DateTime::<chrono::Utc>::from(at)
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string()
    }

    #[test]
    fn instants_at_the_edges_of_days_months_leap_years_and_eras_read_as_chrono_reads_them() {
        for (seconds, nanos) in [
            (0, 0),
            (951_868_799, 999_999_999), // 2000-02-29T23:59:59.999999, nanoseconds truncated
            (951_868_800, 0),
            (1_735_689_599, 1_000),         // 2024-12-31T23:59:59.000001
            (4_107_542_400, 0),             // 2100-03-01, after a century year without 29 February
            (253_402_300_799, 999_999_999), // 9999-12-31T23:59:59.999999
        ] {
            let at = UNIX_EPOCH + Duration::new(seconds, nanos);
            assert_eq!(text(at), by_chrono(at), "{seconds}.{nanos:09}");
        }
    }

    #[test]
    fn every_few_days_from_1970_to_2500_reads_as_chrono_reads_it() {
        let mut seconds = 0_u64;
        while seconds < 16_725_225_600 {
            let at = UNIX_EPOCH + Duration::new(seconds, 123_456_789);
            assert_eq!(text(at), by_chrono(at), "{seconds}");
            seconds += 3 * 86_400 + 3_607;
        }
    }

    #[test]
    fn instants_before_1970_or_after_9999_are_left_to_tracing_subscriber() {
        assert_eq!(utc_micros(UNIX_EPOCH - Duration::from_secs(1)), None);
        assert_eq!(
            utc_micros(UNIX_EPOCH + Duration::from_secs(253_402_300_800)),
            None
        );
    }

    #[test]
    fn now_reads_between_two_readings_of_tracing_subscribers_own_timer() {
        let theirs = || {
            let mut text = String::new();
            tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut Writer::new(&mut text))
                .expect("formatted");
            text
        };
        let before = theirs();
        let ours = text(SystemTime::now());
        let after = theirs();
        // Same width and layout, so text order is time order.
        assert!(before <= ours && ours <= after, "{before} {ours} {after}");
        assert_eq!(ours.len(), before.len());
    }
}
