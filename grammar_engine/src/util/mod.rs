//! Small helpers shared by the rest of the crate.
//!
//! * `int_hash`: a fast hasher for maps keyed by ids made inside the engine.

pub(crate) mod int_hash;
