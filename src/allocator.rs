//! The process allocator (mimalloc), set up to give memory back once clients go idle.
//!
//! mimalloc defers returning freed pages to the OS ("purging") by `purge_delay` (1 s in v3) and
//! purges only when the thread that freed them allocates again; and it never purges the arena it
//! committed eagerly at start-up. A redcar worker whose clients went idle after moving a large
//! value allocates nothing more, so those pages stayed resident: 200 clients that each SET 1 MB
//! and went idle kept 451 KB of RSS per client (bench/crowd.sh, the big-value run). Purging at once and
//! committing arena memory on demand costs nothing measurable on the hot path, where pages are
//! reused long before they empty: two `madvise` calls in 500,000 `-P 16` commands and the same
//! CPU per command (bench/README.md, "Memory given back").
//!
//! Purging only returns what mimalloc has put back into its arenas: pages a thread emptied stay
//! in that thread's heap until it collects them. [`give_back`] collects the calling thread's
//! heap; `redcar::memory` calls it when a session goes idle or ends after a large value went
//! through (docs/decisions/0007-the-cost-of-an-idle-client.md: 43 → 3.4 KB of RSS per client
//! after a 1 MB SET).

use std::ffi::{c_char, c_int, CStr};

/// mimalloc instead of glibc's malloc: every client connection and batch allocates buffers, and
/// glibc spent several times as much work per short-lived connection in `malloc`/`free` and
/// consolidation (the measurements are in bench/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's options are the C enum `mi_option_t` (mimalloc.h); libmimalloc-sys exports names
// only for the options older than these two, so they are named here with their positions in the
// enum, which are the same in the v2 and v3 headers the crate bundles. The test below checks that
// each number is the option it is named after: mimalloc reads `MIMALLOC_<NAME>` into it.

/// `mi_option_arena_eager_commit`: commit an arena's memory when it is reserved (default 2:
/// only on systems that overcommit); 0 commits on demand.
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
/// `mi_option_purge_delay`: milliseconds before freed pages go back to the OS; 0 is at once.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Runs [`tune`] from the executable's `.preinit_array`, before every constructor: mimalloc
/// initialises in its own constructor and reserves its first arena at the first allocation,
/// both before `main`, and the arena's commit mode cannot change afterwards. glibc calls these
/// functions with `(argc, argv, envp)`; musl calls them with no arguments, hence the `cfg`.
#[cfg(target_env = "gnu")]
#[allow(unsafe_code)] // a function pointer placed in a section the C runtime calls once
#[used]
#[link_section = ".preinit_array"]
static TUNE_BEFORE_MAIN: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = tune;

/// Purge freed pages at once and commit arena memory on demand, unless the operator chose
/// otherwise with mimalloc's own variables (`MIMALLOC_PURGE_DELAY`,
/// `MIMALLOC_ARENA_EAGER_COMMIT`), which mimalloc reads for any option not set here; and tell
/// the library how to give a thread's free pages back ([`give_back`]).
extern "C" fn tune(_argc: c_int, _argv: *const *const c_char, envp: *const *const c_char) {
    redcar::memory::set_collector(give_back);
    for (variable, option, value) in [
        (c"MIMALLOC_PURGE_DELAY", PURGE_DELAY, 0),
        (c"MIMALLOC_ARENA_EAGER_COMMIT", ARENA_EAGER_COMMIT, 0),
    ] {
        if !env_has(envp, variable) {
            // SAFETY: mi_option_set only stores the value in mimalloc's option table (no
            // allocation, no initialisation); the index is below `_mi_option_last`.
            #[allow(unsafe_code)]
            unsafe {
                libmimalloc_sys::mi_option_set(option, value)
            };
        }
    }
}

/// Gives back the free pages of the calling thread's heap: the empty pages it kept for reuse
/// and those other threads emptied, which mimalloc otherwise collects only when this thread
/// allocates through its slow path again. Not forced: a forced collection also visits full
/// pages and measured the same here (2.2 against 2.4 KB per client after a 1 MB SET).
fn give_back() {
    // SAFETY: mi_collect only works on the calling thread's own heap; any thread may call it at
    // any time.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(false)
    };
}

/// Whether `envp`, the environment the C runtime hands to `.preinit_array` functions, has
/// `name`. Not `getenv`: libc sets `environ` in its own initialiser, after these functions run,
/// so `getenv` finds nothing here (it did, and the operator's variables were overridden). Not
/// `std::env::var_os` either: it allocates, and an allocation here would reserve mimalloc's arena
/// before it is tuned.
fn env_has(envp: *const *const c_char, name: &CStr) -> bool {
    let name = name.to_bytes();
    if envp.is_null() {
        return false;
    }
    for i in 0.. {
        // SAFETY: `envp` is the C runtime's NULL-terminated array of NUL-terminated strings,
        // read before `main` while nothing else runs; reading stops at the NULL entry.
        #[allow(unsafe_code)]
        let entry = unsafe { *envp.add(i) };
        if entry.is_null() {
            break;
        }
        // SAFETY: as above, `entry` is a NUL-terminated string that outlives this call.
        #[allow(unsafe_code)]
        let entry = unsafe { CStr::from_ptr(entry) }.to_bytes();
        if entry
            .strip_prefix(name)
            .is_some_and(|rest| rest.first() == Some(&b'='))
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value mimalloc holds for `option`.
    fn option(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
        // SAFETY: mi_option_get only reads mimalloc's option table; the index is below
        // `_mi_option_last`.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_option_get(option)
        }
    }

    /// Runs this test binary again with `MIMALLOC_PURGE_DELAY` and `MIMALLOC_ARENA_EAGER_COMMIT`
    /// set: [`tune`] leaves both alone and mimalloc reads them into the options they name, so the
    /// child sees the values at [`PURGE_DELAY`] and [`ARENA_EAGER_COMMIT`] only if those numbers
    /// are the options' positions. Here, without the variables, [`tune`] set both to 0.
    #[test]
    fn the_option_numbers_are_the_named_options() {
        if std::env::var_os("REDCAR_ALLOCATOR_CHILD").is_some() {
            assert_eq!(option(PURGE_DELAY), 1234, "mi_option_purge_delay");
            assert_eq!(
                option(ARENA_EAGER_COMMIT),
                2,
                "mi_option_arena_eager_commit"
            );
            return;
        }
        let exe = std::env::current_exe().expect("the test binary");
        let child = std::process::Command::new(exe)
            .args([
                "--exact",
                "allocator::tests::the_option_numbers_are_the_named_options",
            ])
            .env("REDCAR_ALLOCATOR_CHILD", "1")
            .env("MIMALLOC_PURGE_DELAY", "1234")
            .env("MIMALLOC_ARENA_EAGER_COMMIT", "2")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success(), "{stdout}");
        assert!(
            stdout.contains("1 passed"),
            "the child ran the test: {stdout}"
        );
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(option(PURGE_DELAY), 0);
        }
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            assert_eq!(option(ARENA_EAGER_COMMIT), 0);
        }
    }
}
