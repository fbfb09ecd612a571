//! Where the compiler is in a schema: the JSON pointer that error messages name, how deep it
//! has descended, and the dialect the schema is read in.

use crate::error::{GrammarError, Result};

/// How deep the compiler descends into a schema (through subschemas and `$ref`s) before it
/// gives up. Bounds the recursion of the schema walkers (the pattern walkers are bounded by
/// regex-syntax's nesting limit, JSON values by serde_json's).
pub(crate) const MAX_SCHEMA_DEPTH: usize = 64;

/// The `what` of the error past [`MAX_SCHEMA_DEPTH`] (the walk treats it as a recursion cut).
pub(crate) const NESTING_LIMIT: &str = "JSON Schema nesting depth";

/// The JSON Schema drafts whose validation keywords differ. Ordered by age, so
/// `dialect >= Dialect::Draft2019` reads as "2019-09 or later".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Dialect {
    Draft4,
    Draft6,
    Draft7,
    Draft2019,
    Draft2020,
}

/// Where the compiler is in the schema: the location for error messages and the depth.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// JSON-pointer-like location, e.g. `#/properties/age`.
    pub(crate) path: String,
    /// Subschemas (and `$ref`s) entered so far.
    pub(crate) depth: usize,
    /// The draft the schema is read in.
    pub(crate) dialect: Dialect,
}

impl Ctx {
    pub(crate) fn root() -> Ctx {
        Ctx::root_in(Dialect::Draft2020)
    }

    /// The root of a schema read in `dialect`.
    pub(crate) fn root_in(dialect: Dialect) -> Ctx {
        Ctx { path: "#".to_string(), depth: 0, dialect }
    }

    /// The context of the subschema at `segments` (already pointer-escaped) below this one.
    pub(crate) fn child(&self, segments: &str) -> Result<Ctx> {
        self.at_path(format!("{}/{}", self.path, segments))
    }

    /// The context of a subschema at an absolute location (the target of a `$ref`).
    pub(crate) fn at_path(&self, path: String) -> Result<Ctx> {
        if self.depth >= MAX_SCHEMA_DEPTH {
            return Err(GrammarError::TooLarge {
                what: NESTING_LIMIT,
                limit: MAX_SCHEMA_DEPTH,
                detail: format!("the schema nests too deeply at {path}"),
            });
        }
        Ok(Ctx {
            path,
            depth: self.depth + 1,
            dialect: self.dialect,
        })
    }

    pub(crate) fn invalid(&self, reason: impl Into<String>) -> GrammarError {
        GrammarError::invalid_schema(&self.path, reason)
    }

    pub(crate) fn unsupported(&self, keyword: &str, reason: impl Into<String>) -> GrammarError {
        GrammarError::unsupported_keyword(keyword, &self.path, reason)
    }
}

