//! `approval-resume keys status|rotate` (docs/design.md §11): what is stored under which key, and moving every value
//! under the first key of ENCRYPTION_KEYS while the service serves. Key ids are printed, keys never.

use std::time::Duration;

use super::CommandError;
use super::table::{Align, Table};
use crate::config::KeysCommand;
use crate::sealing::Sealer;
use crate::storage::{Database, rekeying};

pub async fn run(
    pool: &Database,
    sealer: &Sealer,
    command: KeysCommand,
) -> Result<(), CommandError> {
    match command {
        KeysCommand::Status { .. } => status(pool).await,
        KeysCommand::Rotate { batch_size, .. } => rotate(pool, sealer, batch_size).await,
    }
}

async fn status(pool: &Database) -> Result<(), CommandError> {
    let mut table = Table::new(&[
        ("COLUMN", Align::Left),
        ("KEY ID", Align::Left),
        ("VALUES", Align::Right),
    ]);
    for count in rekeying::status(pool).await? {
        let key = count.key_id.as_deref().unwrap_or("(clear)");
        table.row(vec![
            count.column.to_string(),
            key.to_owned(),
            count.values.to_string(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// Batches until no row is left off the first key. A batch that skipped rows locked by a decision leaves them for
/// the next pass, after a short pause.
async fn rotate(pool: &Database, sealer: &Sealer, batch_size: i64) -> Result<(), CommandError> {
    let Some(first) = sealer.sealing_key_id() else {
        return Err(CommandError::Usage(
            "ENCRYPTION_KEYS is empty: there is no key to rotate to".into(),
        ));
    };
    println!("re-encrypting under key id {first}");
    for table in rekeying::TABLES {
        let mut done = 0u64;
        loop {
            let rewritten = rekeying::rotate_batch(pool, sealer, table, batch_size).await?;
            done += rewritten;
            if rewritten > 0 {
                println!("{}: {done} rows re-encrypted", table.name);
                continue;
            }
            if rekeying::remaining(pool, sealer, table).await? == 0 {
                break;
            }
            // Every row left is locked by a decision right now.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("{}: done, {done} rows re-encrypted", table.name);
    }
    println!("every value is under key id {first}");
    Ok(())
}
