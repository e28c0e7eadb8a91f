//! The allocator's settings, so that the service's resident memory follows what its decisions hold in flight
//! (README, "Memory").
//!
//! The binary allocates through mimalloc (`main.rs`). By default mimalloc commits its arenas whole on Linux and
//! gives freed pages back only after a second. With 8 decisions of 10,000-message runs in flight (about 30 MiB of
//! them) the peak was 64.7 MiB in a fresh process even with `MIMALLOC_PURGE_DELAY=0`; committing only what is used
//! (`arena_eager_commit` 0) and giving freed pages back at once (`purge_delay` 0) brought it to 37.9 MiB
//! (BENCHMARKS.md, "The allocator's settings in the binary"), for a CPU price within the noise of a small deny.
//!
//! They are set as mimalloc's defaults (`mi_option_set_default`), as the binary loads: mimalloc reserves its first
//! arena on the first allocation, before `main`, with the options it has then. A default gives way to the
//! environment, as mimalloc reads it (any letter case, legacy names included), so an operator's
//! `MIMALLOC_PURGE_DELAY` or `MIMALLOC_ARENA_EAGER_COMMIT` still wins, whichever constructor runs first.

use std::ffi::c_long;

use libmimalloc_sys::{mi_option_get, mi_option_set_default, mi_option_t};

/// One mimalloc option the service sets: its index in mimalloc's `mi_option_e` (mimalloc.h of the vendored
/// version; `libmimalloc-sys` names only some of them) and the service's value.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub option: mi_option_t,
    pub value: c_long,
}

/// Commit arena memory as it is used, not all at once when the arena is reserved.
pub const ARENA_EAGER_COMMIT: Setting = Setting {
    option: 4,
    value: 0,
};

/// Give freed memory back to the system at once instead of after mimalloc's delay (1,000 ms).
pub const PURGE_DELAY: Setting = Setting {
    option: 15,
    value: 0,
};

pub const SETTINGS: [Setting; 2] = [ARENA_EAGER_COMMIT, PURGE_DELAY];

/// Makes every value of [`SETTINGS`] mimalloc's default, which a variable in the environment overrides. Called as
/// the binary loads, before Rust's runtime allocates (`main.rs`); it allocates nothing.
pub fn apply() {
    for setting in SETTINGS {
        // SAFETY: mi_option_set_default only stores a value in mimalloc's table of options; the index is in range.
        unsafe { mi_option_set_default(setting.option, setting.value) };
    }
}

/// The value mimalloc uses for an option now, for the start-up log line.
pub fn current(setting: Setting) -> c_long {
    // SAFETY: mi_option_get only reads mimalloc's table of options; the index is in range.
    unsafe { mi_option_get(setting.option) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_indices_name_the_options_mimalloc_documents_by_their_defaults() {
        // Only the defaults tell the options apart from outside: 2 ("on where the OS overcommits") for
        // arena_eager_commit, 1,000 ms for purge_delay. Nothing in the test binary sets them, unless its environment
        // does.
        if std::env::vars_os().any(|(name, _)| {
            name.to_string_lossy()
                .to_ascii_uppercase()
                .starts_with("MIMALLOC_")
        }) {
            return;
        }
        assert_eq!(current(ARENA_EAGER_COMMIT), 2);
        assert_eq!(current(PURGE_DELAY), 1000);
    }
}
