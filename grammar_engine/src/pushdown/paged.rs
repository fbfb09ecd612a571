//! An append-only store whose entries never move: what a pushdown grammar keeps its masks and
//! configurations in, so that a mask handed out (to Python, as a NumPy view) stays valid while
//! more are added from other threads.
//!
//! A fixed array of pages, each allocated on first use and never freed or reallocated before
//! the store is dropped; an entry is a [`OnceLock`] set once. Reading needs no lock.

use std::sync::OnceLock;

const PAGE: usize = 1024;
const PAGES: usize = 4096;

/// At most `PAGE * PAGES` entries, set once each.
pub struct Paged<T> {
    pages: Box<[OnceLock<Box<[OnceLock<T>]>>]>,
}

impl<T> Default for Paged<T> {
    fn default() -> Self {
        Paged::new()
    }
}

impl<T> Paged<T> {
    pub const CAPACITY: usize = PAGE * PAGES;

    pub fn new() -> Paged<T> {
        Paged { pages: (0..PAGES).map(|_| OnceLock::new()).collect() }
    }

    /// The entry at `index`, if set.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.pages.get(index / PAGE)?.get()?.get(index % PAGE)?.get()
    }

    /// Sets the entry at `index` (the first value set wins) and returns it; `None` past the
    /// capacity.
    pub fn set(&self, index: usize, value: T) -> Option<&T> {
        let page = self.pages.get(index / PAGE)?.get_or_init(|| (0..PAGE).map(|_| OnceLock::new()).collect());
        let cell = &page[index % PAGE];
        let _ = cell.set(value);
        cell.get()
    }
}

impl<T> std::fmt::Debug for Paged<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pages = self.pages.iter().filter(|p| p.get().is_some()).count();
        write!(f, "Paged({pages} pages)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_set_once_and_stay_put() {
        let p: Paged<Vec<u32>> = Paged::new();
        assert!(p.get(5).is_none());
        let first = p.set(5, vec![1, 2]).map(|v| v.as_ptr());
        assert_eq!(p.set(5, vec![9]).map(|v| v.as_ptr()), first);
        for i in 0..5000 {
            p.set(i, vec![i as u32]);
        }
        assert_eq!(p.get(5).map(|v| v.as_ptr()), first);
        assert_eq!(p.get(4999), Some(&vec![4999]));
        assert!(p.set(Paged::<Vec<u32>>::CAPACITY, vec![]).is_none());
    }
}
