//! Rebuilds the binary when a migration is added or changed: `sqlx::migrate!` embeds `migrations/` at compile time,
//! and cargo does not otherwise know that the directory is an input (sqlx's documented build script).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
