//! Text in memory backed by huge pages where the system has them.
//!
//! The kept lines of a chunk of a session file are megabytes written once; in ordinary
//! pages each 4 KiB of them costs the kernel a page fault when first written, which is
//! much of the cost of loading a large session. [`HugeText`] holds such text in one
//! allocation aligned to a huge page (2 MiB) and asks the system to back it with huge pages
//! (`storage::sys::advise_huge_pages`), so a fault brings 2 MiB.
//!
//! Invariants:
//! - `ptr[..len]` is UTF-8: text is only ever appended as whole `&str`s.
//! - `ptr` was allocated with `layout(cap)`, or is dangling when `cap` is 0.
//! - Only the huge pages the caller expects to fill (at least three quarters of each) are
//!   advised, so a huge page holds little that is not text, and a text smaller than a
//!   huge page is an ordinary allocation.

use std::alloc::{self, Layout};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::storage::sys;

/// The size and alignment of a huge page on the systems that have them (x86-64, AArch64
/// with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Growable UTF-8 text in an allocation aligned to huge pages when it spans any.
pub struct HugeText {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: `HugeText` owns its allocation as a `Box<str>` would, and shared references only
// read it.
unsafe impl Send for HugeText {}
// SAFETY: as for `Send`: no interior mutability.
unsafe impl Sync for HugeText {}

fn layout(cap: usize) -> Option<Layout> {
    let align = if cap >= HUGE_PAGE { HUGE_PAGE } else { 1 };
    Layout::from_size_align(cap, align).ok()
}

impl HugeText {
    /// Empty text with room for `expected` bytes, and `headroom` more bytes that are not
    /// advised (the caller's estimate may fall short by that much).
    pub fn with_capacity(expected: usize, headroom: usize) -> Self {
        let mut text = HugeText {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
        };
        text.reallocate(expected.saturating_add(headroom), expected);
        text
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // SAFETY: `ptr[..len]` is initialised and UTF-8 (only whole `&str`s are written).
        unsafe {
            let bytes = std::slice::from_raw_parts(self.ptr.as_ptr(), self.len);
            std::str::from_utf8_unchecked(bytes)
        }
    }

    /// The length of the text in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `s`, moving the text to a larger allocation when it does not fit.
    pub fn push_str(&mut self, s: &str) {
        let needed = self.len.saturating_add(s.len());
        if needed > self.cap {
            self.reallocate(needed.max(self.cap.saturating_mul(2)), 0);
        }
        // SAFETY: `cap - len >= s.len()`, and `s` cannot overlap memory this owns
        // exclusively.
        unsafe {
            let end = self.ptr.as_ptr().add(self.len);
            std::ptr::copy_nonoverlapping(s.as_ptr(), end, s.len());
        }
        self.len = needed;
    }

    /// Moves the text to an allocation of at least `cap` bytes (whole huge pages when it
    /// spans one), advising the huge pages within its first `advised` bytes.
    fn reallocate(&mut self, cap: usize, advised: usize) {
        let cap = if cap >= HUGE_PAGE {
            cap.div_ceil(HUGE_PAGE).saturating_mul(HUGE_PAGE)
        } else {
            cap
        };
        if cap == 0 {
            return;
        }
        let Some(new_layout) = layout(cap) else {
            alloc::handle_alloc_error(Layout::new::<u8>())
        };
        // SAFETY: `new_layout` has a non-zero size.
        let Some(ptr) = NonNull::new(unsafe { alloc::alloc(new_layout) }) else {
            alloc::handle_alloc_error(new_layout)
        };
        // A huge page the text is expected to fill three quarters of is worth its fault.
        let pages = (advised.min(cap) + HUGE_PAGE / 4) / HUGE_PAGE;
        let whole_pages = (pages * HUGE_PAGE).min(cap);
        if cap >= HUGE_PAGE && whole_pages > 0 {
            // SAFETY: `ptr[..whole_pages]` is within the new allocation, which nothing else
            // refers to yet.
            let region = unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr().cast::<MaybeUninit<u8>>(), whole_pages)
            };
            sys::advise_huge_pages(region);
        }
        // SAFETY: the old allocation holds `len` initialised bytes, the new one has room for
        // them, and the two are distinct; the old one was allocated with `layout(self.cap)`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.len);
            if let Some(old) = layout(self.cap).filter(|_| self.cap > 0) {
                alloc::dealloc(self.ptr.as_ptr(), old);
            }
        }
        self.ptr = ptr;
        self.cap = cap;
    }
}

impl Drop for HugeText {
    fn drop(&mut self) {
        if let Some(layout) = layout(self.cap).filter(|_| self.cap > 0) {
            // SAFETY: `ptr` was allocated with `layout(cap)` and is freed once, here.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl AsRef<str> for HugeText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for HugeText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeText")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_across_growth_and_huge_pages() {
        let mut reference = String::new();
        let mut text = HugeText::with_capacity(10, 0);
        let line = "é{\"type\":\"message\",\"id\":\"0123abcd\"}\n".repeat(1000);
        while reference.len() < 3 * HUGE_PAGE {
            text.push_str(&line);
            reference.push_str(&line);
            assert_eq!(text.len(), reference.len());
        }
        assert_eq!(text.as_str(), reference);
        assert!(text.cap >= text.len());
        assert_eq!(
            text.ptr.as_ptr() as usize % HUGE_PAGE,
            0,
            "aligned once huge"
        );
    }

    #[test]
    fn a_large_text_is_aligned_to_huge_pages_and_a_small_one_is_not_rounded() {
        let big = HugeText::with_capacity(HUGE_PAGE + 1, 100);
        assert_eq!(big.cap, 2 * HUGE_PAGE);
        assert_eq!(big.ptr.as_ptr() as usize % HUGE_PAGE, 0);
        let small = HugeText::with_capacity(1000, 24);
        assert_eq!(small.cap, 1024);
        let empty = HugeText::with_capacity(0, 0);
        assert_eq!((empty.cap, empty.as_str()), (0, ""));
    }
}
