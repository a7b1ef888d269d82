//! The counting allocator: the system allocator, with every allocation and reallocation counted.
//!
//! Written here rather than taken from a crate: the crates made for this (stats_alloc and its
//! kind) have had no release for years, and what the test needs is two counters. It is the one
//! `unsafe` outside `src/allocator.rs`, and only in this test binary: `GlobalAlloc` is an unsafe
//! trait, and each method forwards its arguments unchanged to `System`, whose contract is the
//! same, so the caller's promises are passed on as they came.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `System`, counting the calls that ask it for memory.
pub struct Counting {
    allocations: AtomicUsize,
}

impl Counting {
    pub const fn new() -> Self {
        Counting {
            allocations: AtomicUsize::new(0),
        }
    }

    /// Allocations and reallocations so far, process-wide.
    pub fn allocations(&self) -> usize {
        self.allocations.load(Ordering::Relaxed)
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`; the caller vouches for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[test]
fn it_counts_what_asks_for_memory() {
    let before = super::GLOBAL.allocations();
    let mut v: Vec<u64> = Vec::with_capacity(4);
    v.extend(0..64);
    std::hint::black_box(&v);
    assert!(super::GLOBAL.allocations() >= before + 2);
}
