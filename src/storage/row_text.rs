//! A text column handed on without copying it out of its row: the transcript a decision reads is most of the row,
//! and of the answer, so the answer's bytes are the row's own bytes rather than a copy of them.
//!
//! sqlx keeps a row's values in one shared buffer (`bytes::Bytes`), a slice of what it read from the socket.
//! Decoding a column to `String` copies it; here the row itself becomes the owner of a `Bytes` that points into
//! that buffer, so a 2 MB transcript is copied no more (BENCHMARKS.md, "Postgres's work per deny, counted"). The
//! whole row stays alive with it, other columns and all: keep it only for a row that is mostly that text, and only
//! for as long as the answer needs it (`run_snapshot` copies the transcript when the calls are the larger part).

use bytes::Bytes;
use sqlx::postgres::PgRow;
use sqlx::{Column, Row};

use super::StorageError;

/// The row kept alive for one of its text columns; a `Bytes` over it reads that column's bytes.
struct RowText {
    row: PgRow,
    ordinal: usize,
}

impl AsRef<[u8]> for RowText {
    fn as_ref(&self) -> &[u8] {
        // Read once, by `Bytes::from_owner`, after `text_of` has decoded the same value as `&str`: not null, and
        // UTF-8. `&[u8]` decodes a text value as its bytes without copying them (unchecked: sqlx would refuse the
        // type, `bytea`'s, otherwise). Both read the same bytes of the row; should they ever not, this gives none,
        // and `text_of` refuses the mismatch.
        self.row
            .try_get_unchecked::<&[u8], _>(self.ordinal)
            .unwrap_or_default()
    }
}

/// The text of column `name` of `row` (UTF-8, as every Postgres text value is), sharing the row's buffer; `None`
/// when it is null.
pub fn text_of(row: PgRow, name: &str) -> Result<Option<Bytes>, StorageError> {
    let ordinal = row.try_column(name)?.ordinal();
    let Some(checked) = row.try_get::<Option<&str>, _>(ordinal)?.map(str::len) else {
        return Ok(None);
    };
    let text = Bytes::from_owner(RowText { row, ordinal });
    if text.len() != checked {
        return Err(StorageError::Corrupt(format!(
            "column {name} reads as {checked} bytes of text and as {} bytes",
            text.len()
        )));
    }
    Ok(Some(text))
}
