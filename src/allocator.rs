//! The process allocator (mimalloc), set up to give memory back once clients go idle.
//!
//! mimalloc defers returning freed pages to the OS ("purging") by `purge_delay` (1 s in v3) and
//! purges only when the thread that freed them allocates again; and it never purges the arena it
//! committed eagerly at start-up. A redcar worker whose clients went idle after moving a large
//! value allocates nothing more, so those pages stayed resident: 200 clients that each SET 1 MB
//! and went idle kept 451 KB of RSS per client (bench/crowd.sh, item 4). Purging at once and
//! committing arena memory on demand costs nothing measurable on the hot path, where pages are
//! reused long before they empty: two `madvise` calls in 500,000 `-P 16` commands and the same
//! CPU per command (bench/README.md, "Memory given back").
//!
//! Purging only returns what mimalloc has put back into its arenas: pages a thread emptied stay
//! in that thread's heap until it collects them. [`give_back`] collects the calling thread's
//! heap; `redcar::memory` calls it when a session goes idle or ends after a large value went
//! through (issue 26: 43 → 3.4 KB of RSS per client after a 1 MB SET).

use std::ffi::{c_char, CStr};

/// mimalloc instead of glibc's malloc: every client connection and batch allocates buffers, and
/// glibc spent ~6,000 instructions per short-lived connection in `malloc`/`free`/consolidation
/// (callgrind; numbers in bench/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit` in mimalloc v3's `mi_option_t` (the crate exports no name).
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
/// `mi_option_purge_delay` in mimalloc v3's `mi_option_t`.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Runs [`tune`] from the executable's `.preinit_array`, before every constructor: mimalloc
/// initialises in its own constructor and reserves its first arena at the first allocation,
/// both before `main`, and the arena's commit mode cannot change afterwards.
#[allow(unsafe_code)] // a function pointer placed in a section the C runtime calls once
#[used]
#[link_section = ".preinit_array"]
static TUNE_BEFORE_MAIN: extern "C" fn() = tune;

/// Purge freed pages at once and commit arena memory on demand, unless the operator chose
/// otherwise with mimalloc's own variables (`MIMALLOC_PURGE_DELAY`,
/// `MIMALLOC_ARENA_EAGER_COMMIT`), which mimalloc reads for any option not set here; and tell
/// the library how to give a thread's free pages back ([`give_back`]).
extern "C" fn tune() {
    redcar::memory::set_collector(give_back);
    for (variable, option, value) in [
        (c"MIMALLOC_PURGE_DELAY", PURGE_DELAY, 0),
        (c"MIMALLOC_ARENA_EAGER_COMMIT", ARENA_EAGER_COMMIT, 0),
    ] {
        if !env_is_set(variable) {
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

/// Whether the environment has `name`, without allocating (`std::env::var_os` copies the value
/// into an `OsString`, and an allocation here would reserve mimalloc's arena before it is tuned).
fn env_is_set(name: &CStr) -> bool {
    extern "C" {
        fn getenv(name: *const c_char) -> *const c_char;
    }
    // SAFETY: `name` is NUL-terminated; before main nothing else runs, so nothing changes the
    // environment while glibc reads it; the result is only compared with null.
    #[allow(unsafe_code)]
    let value = unsafe { getenv(name.as_ptr()) };
    !value.is_null()
}
