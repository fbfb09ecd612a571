//! A regular grammar's token index held within a byte budget.
//!
//! Rows are computed on a state's first visit and kept by state. When keeping a new row would
//! pass the budget, rows not used since the clock hand last passed them are dropped (a clock
//! sweep, the usual cheap stand-in for least recently used) until a quarter of the budget is
//! free again, and a dropped row is computed again on its next visit. Rows are handed out
//! shared ([`Arc`]), so a row somebody holds stays valid after the index drops its copy.
//!
//! The hot path (a row that is kept) takes one read lock and one reference count; only
//! keeping a new row takes the clock's lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::grammar::index::Row;
use crate::util::StateId;

/// Rows by state, at most `budget` bytes of them.
#[derive(Debug)]
pub(crate) struct RowCache {
    slots: Box<[Slot]>,
    /// Bytes of the rows kept now.
    bytes: AtomicUsize,
    budget: usize,
    /// The states with a row, in the order the clock hand meets them.
    ring: Mutex<VecDeque<u32>>,
    /// Rows dropped to stay within the budget, ever.
    dropped: AtomicUsize,
}

#[derive(Debug, Default)]
struct Slot {
    row: RwLock<Option<Arc<Row>>>,
    /// Set when the row is read; cleared when the clock hand passes it.
    used: AtomicBool,
}

/// A row that alone is larger than the whole budget.
#[derive(Debug)]
pub(crate) struct RowTooLarge {
    pub bytes: usize,
}

impl RowCache {
    pub fn new(states: usize, budget: usize) -> RowCache {
        RowCache {
            slots: (0..states).map(|_| Slot::default()).collect(),
            bytes: AtomicUsize::new(0),
            budget,
            ring: Mutex::new(VecDeque::new()),
            dropped: AtomicUsize::new(0),
        }
    }

    /// The row kept for `state` (marked used), if any. `state` must be in range.
    #[inline]
    pub fn get(&self, state: StateId) -> Option<Arc<Row>> {
        let slot = &self.slots[state.as_usize()];
        let row = slot.row.read().unwrap_or_else(PoisonError::into_inner).clone()?;
        if !slot.used.load(Ordering::Relaxed) {
            slot.used.store(true, Ordering::Relaxed);
        }
        Some(row)
    }

    /// The row kept for `state`, if any, without marking it used (for whole-index passes that
    /// should not keep rows alive).
    pub fn peek(&self, state: StateId) -> Option<Arc<Row>> {
        self.slots.get(state.as_usize())?.row.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Keeps `row` for `state` and returns it, or the row another thread kept first. Drops
    /// other rows when the budget would be passed; refuses a row larger than the budget.
    pub fn insert(&self, state: StateId, row: Row) -> Result<Arc<Row>, RowTooLarge> {
        let size = row.memory_bytes();
        if size > self.budget {
            return Err(RowTooLarge { bytes: size });
        }
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &self.slots[state.as_usize()];
        let row = {
            let mut kept = slot.row.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(first) = kept.as_ref() {
                return Ok(first.clone());
            }
            let row = Arc::new(row);
            *kept = Some(row.clone());
            row
        };
        slot.used.store(true, Ordering::Relaxed);
        ring.push_back(state.as_u32());
        let total = self.bytes.fetch_add(size, Ordering::Relaxed) + size;
        if total > self.budget {
            self.sweep(&mut ring, state.as_u32());
        }
        Ok(row)
    }

    /// Drops unused rows until a quarter of the budget is free, never `keep`'s. Each row is
    /// passed at most twice (once to clear its mark, once to drop it), so this ends.
    fn sweep(&self, ring: &mut VecDeque<u32>, keep: u32) {
        let target = self.budget - self.budget / 4;
        let mut passes = 2 * ring.len();
        while self.bytes.load(Ordering::Relaxed) > target && passes > 0 {
            passes -= 1;
            let Some(s) = ring.pop_front() else { break };
            let slot = &self.slots[s as usize];
            if s == keep || slot.used.swap(false, Ordering::Relaxed) {
                ring.push_back(s);
                continue;
            }
            if let Some(row) = slot.row.write().unwrap_or_else(PoisonError::into_inner).take() {
                self.bytes.fetch_sub(row.memory_bytes(), Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Bytes of the rows kept now.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The number of rows kept now.
    pub fn len(&self) -> usize {
        self.ring.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Rows dropped so far to stay within the budget.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Heap bytes of the table itself (one slot per state), rows not counted.
    pub fn table_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }
}
