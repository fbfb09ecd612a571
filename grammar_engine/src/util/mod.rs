//! Small pieces shared by the rest of the crate.
//!
//! * `primitives`: the id newtypes [`StateId`] and [`TokenId`];
//! * `int_hash`: a fast hasher for maps keyed by ids made inside the engine;
//! * `background`: compilation at a lower CPU priority than decoding.

pub mod background;
pub(crate) mod int_hash;
mod primitives;

pub use primitives::{RuleId, StateId, TokenId};
