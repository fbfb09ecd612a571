//! Id newtypes: a DFA state and a token are both a `u32` underneath, but never each other.
//!
//! Both are `#[repr(transparent)]`, so a table of ids costs exactly what a table of `u32`s
//! does. A [`StateId`] is dense (state 0 is a DFA's start, states count up from there);
//! [`StateId::DEAD`] is the one target that means "this byte makes a full match impossible"
//! and is never the id of a real state. An id that a caller hands in (from Python, say) is
//! checked where it enters: a grammar answers an unknown state with
//! [`GrammarError::InvalidState`](crate::GrammarError::InvalidState), never a panic.

use std::fmt;

/// The id of a DFA state (and so of a grammar state).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateId(u32);

impl StateId {
    /// The transition target meaning "this byte makes a full match impossible". No state has
    /// this id.
    pub const DEAD: StateId = StateId(u32::MAX);

    /// The state with index `id`.
    #[inline(always)]
    pub const fn new(id: u32) -> StateId {
        StateId(id)
    }

    /// The state with index `index`, which must fit a `u32` (tables are indexed by `usize`).
    #[inline(always)]
    pub(crate) const fn from_index(index: usize) -> StateId {
        debug_assert!(index < u32::MAX as usize);
        StateId(index as u32)
    }

    #[inline(always)]
    pub const fn as_u32(self) -> u32 {
        self.0
    }

    /// The index of this state in per-state tables.
    #[inline(always)]
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }

    #[inline(always)]
    pub const fn is_dead(self) -> bool {
        self.0 == u32::MAX
    }
}

impl fmt::Debug for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_dead() {
            write!(f, "StateId::DEAD")
        } else {
            write!(f, "StateId({})", self.0)
        }
    }
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The id of a token of a vocabulary.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenId(u32);

impl TokenId {
    #[inline(always)]
    pub const fn new(id: u32) -> TokenId {
        TokenId(id)
    }

    #[inline(always)]
    pub const fn as_u32(self) -> u32 {
        self.0
    }

    /// The index of this token in per-token tables (and its bit in a mask).
    #[inline(always)]
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenId({})", self.0)
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The id of a rule of a pushdown grammar (`crate::pushdown`): rules are numbered densely
/// from 0 in the order they are declared.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId(u32);

impl RuleId {
    #[inline(always)]
    pub const fn new(id: u32) -> RuleId {
        RuleId(id)
    }

    #[inline(always)]
    pub const fn as_u32(self) -> u32 {
        self.0
    }

    /// The index of this rule in per-rule tables.
    #[inline(always)]
    pub const fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RuleId({})", self.0)
    }
}
