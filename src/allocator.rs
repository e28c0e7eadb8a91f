//! The allocator's settings, so that the service's resident memory follows what its decisions hold in flight
//! (issue 17; README, "Memory").
//!
//! The binary allocates through mimalloc (`main.rs`). As mimalloc ships, it keeps what it commits: its arenas are
//! committed whole on Linux, and freed pages go back to the system only after a second. With 8 decisions of
//! 10,000-message runs that held 64–71 MiB at the peak for about 30 MiB in flight; committing only what is used
//! (`arena_eager_commit` 0) and giving freed pages back at once (`purge_delay` 0) held 41 MiB
//! (BENCHMARKS.md, "The allocator's settings in the binary"). The price is a few microseconds of system time per
//! small decision, which BENCHMARKS.md measures beside it.
//!
//! mimalloc reads its options from the environment when the process loads; these are set just after, as the binary
//! loads too (before Rust's runtime allocates and mimalloc reserves its first arena), and only where the environment
//! did not name the option, so an operator's `MIMALLOC_PURGE_DELAY` or `MIMALLOC_ARENA_EAGER_COMMIT` still wins.

use std::ffi::c_long;

use libmimalloc_sys::{mi_option_get, mi_option_set, mi_option_t};

/// One mimalloc option the service sets: its index in mimalloc's `mi_option_e` (mimalloc.h of the vendored
/// version; `libmimalloc-sys` names only some of them), the variables mimalloc reads it from, and the service's
/// value.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub option: mi_option_t,
    /// The variables mimalloc reads, as it looks them up: its name and its legacy name, each in lower and in upper
    /// case. Spelled out rather than derived, so that [`apply`] allocates nothing before it has set the options.
    pub variables: [&'static str; 4],
    pub value: c_long,
}

/// Commit arena memory as it is used, not all at once when the arena is reserved.
pub const ARENA_EAGER_COMMIT: Setting = Setting {
    option: 4,
    variables: [
        "mimalloc_arena_eager_commit",
        "MIMALLOC_ARENA_EAGER_COMMIT",
        "mimalloc_eager_region_commit",
        "MIMALLOC_EAGER_REGION_COMMIT",
    ],
    value: 0,
};

/// Give freed memory back to the system at once instead of after mimalloc's delay (1,000 ms).
pub const PURGE_DELAY: Setting = Setting {
    option: 15,
    variables: [
        "mimalloc_purge_delay",
        "MIMALLOC_PURGE_DELAY",
        "mimalloc_reset_delay",
        "MIMALLOC_RESET_DELAY",
    ],
    value: 0,
};

/// In this order: the arena option first, so that it is set before anything below allocates (`var` may, when it
/// finds a variable).
pub const SETTINGS: [Setting; 2] = [ARENA_EAGER_COMMIT, PURGE_DELAY];

/// Sets every option of [`SETTINGS`] the environment does not name (`var`: whether a variable is set). Called as the
/// binary loads, before Rust's runtime allocates (`main.rs`).
pub fn apply(var: impl Fn(&str) -> bool) {
    for setting in SETTINGS {
        if !setting.variables.iter().any(|name| var(name)) {
            // SAFETY: mi_option_set only stores a value in mimalloc's table of options; the index is in range.
            unsafe { mi_option_set(setting.option, setting.value) };
        }
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
        if SETTINGS
            .iter()
            .flat_map(|setting| setting.variables)
            .any(|name| std::env::var_os(name).is_some())
        {
            return;
        }
        assert_eq!(current(ARENA_EAGER_COMMIT), 2);
        assert_eq!(current(PURGE_DELAY), 1000);
    }
}
