//! What every fuzz target links: an allocator that makes an allocation over 256 MiB a finding.
//! libFuzzer's own `-malloc_limit_mb` counts only allocations a sanitizer's allocator sees, and
//! these targets run without one (scripts/fuzz.sh), so the limit is kept here instead.

use std::alloc::{GlobalAlloc, Layout, System};

/// The most one allocation of a parser of outside input may ask for.
pub const LIMIT: usize = 256 << 20;

struct Capped;

/// Says so without allocating (the allocator is what refused) and aborts: libFuzzer keeps the
/// input as a crash.
fn over() -> ! {
    let message = b"isobench-fuzz: an allocation over 256 MiB\n";
    // SAFETY: write(2) to stderr from a valid buffer.
    unsafe { libc_write(2, message.as_ptr(), message.len()) };
    std::process::abort()
}

unsafe extern "C" {
    #[link_name = "write"]
    fn libc_write(fd: i32, buf: *const u8, count: usize) -> isize;
}

// SAFETY: every call is passed to the system allocator unchanged, or aborts.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT {
            over();
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT {
            over();
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > LIMIT {
            over();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Capped = Capped;
