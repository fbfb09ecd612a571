//! The one error type of the grammar core.
//!
//! Every failure a caller can cause (a bad pattern, a schema we do not support, a grammar too
//! large to index, a tokenizer file we cannot read) is a variant here with a message that says
//! what went wrong and, where it helps, where. The Python layer maps each variant onto a
//! subclass of `onyx.GrammarError`.

use std::fmt;

use crate::util::StateId;

/// What went wrong while building a vocabulary, compiling a grammar or stepping through one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrammarError {
    /// The regex does not parse. `offset` is the byte offset in the pattern where it goes wrong.
    InvalidRegex { pattern: String, offset: usize, reason: String },
    /// The regex parses but uses something a DFA cannot express (look-around, backreferences,
    /// Unicode word boundaries).
    UnsupportedRegex { construct: String, reason: String },
    /// A DFA, a grammar or an index grew past its configured limit.
    TooLarge { what: &'static str, limit: usize, detail: String },
    /// No string at all matches the grammar.
    EmptyLanguage { detail: String },
    /// Strings match the grammar, but no sequence of this vocabulary's tokens spells one.
    NotCompletable { detail: String },
    /// A JSON Schema keyword (or a value of one) that the compiler does not handle.
    UnsupportedSchemaKeyword { keyword: String, path: String, reason: String },
    /// The schema itself is malformed (not JSON, wrong types, dangling `$ref`, ...).
    InvalidSchema { path: String, reason: String },
    /// A tokenizer file that cannot be read or understood.
    Vocabulary { reason: String },
    /// `advance` was called with a token the mask does not allow at this state. `token` is
    /// the id as the caller gave it (an id from Python may be negative or past `u32`).
    TokenNotAllowed { state: StateId, token: i64, reason: String },
    /// A state id that does not belong to this grammar, as the caller gave it (an id from
    /// Python may be negative or past `u32`).
    InvalidState { state: i64, num_states: usize },
    /// A structure spec (see [`crate::compile_structure`]) that is malformed: `path` is a JSON pointer
    /// into the spec.
    InvalidStructure { path: String, reason: String },
    /// An error raised by one part of a structure spec (a regex, a schema, a token), with the
    /// JSON pointer of that part.
    InStructure { path: String, error: Box<GrammarError> },
    /// A grammar in a grammar language (GBNF, Lark) or a pushdown grammar that is malformed:
    /// a syntax error, an undefined or unproductive rule, left recursion. `line` and `column`
    /// (1-based, 0 when unknown) locate it in the text; `rule` names the rule when there is one.
    InvalidGrammar { syntax: &'static str, line: usize, column: usize, rule: Option<String>, reason: String },
    /// An operation that needs a regular language (an intersection, a difference) met one that
    /// calls rules.
    NotRegular { detail: String },
    /// A language that must be text (the content of a JSON string) reads a byte no UTF-8 text
    /// contains: a special token's marker.
    NotText { detail: String },
}

impl GrammarError {
    pub(crate) fn vocab(reason: impl Into<String>) -> Self {
        GrammarError::Vocabulary { reason: reason.into() }
    }

    /// `path` is a JSON pointer without its leading `#` (empty for the root).
    pub(crate) fn invalid_structure(path: &str, reason: impl Into<String>) -> Self {
        GrammarError::InvalidStructure { path: format!("#{path}"), reason: reason.into() }
    }

    /// This error, located at `path` in a structure spec (an error already located keeps its
    /// innermost location).
    pub(crate) fn in_structure(self, path: &str) -> Self {
        match self {
            located @ (GrammarError::InStructure { .. } | GrammarError::InvalidStructure { .. }) => located,
            other => GrammarError::InStructure { path: format!("#{path}"), error: Box::new(other) },
        }
    }

    /// A malformed grammar of language `syntax`, at `line`:`column` (0: unknown), in `rule`.
    pub(crate) fn invalid_grammar(
        syntax: &'static str,
        line: usize,
        column: usize,
        rule: Option<&str>,
        reason: impl Into<String>,
    ) -> Self {
        GrammarError::InvalidGrammar { syntax, line, column, rule: rule.map(str::to_string), reason: reason.into() }
    }

    pub(crate) fn invalid_schema(path: &str, reason: impl Into<String>) -> Self {
        GrammarError::InvalidSchema { path: display_path(path), reason: reason.into() }
    }

    pub(crate) fn unsupported_keyword(keyword: &str, path: &str, reason: impl Into<String>) -> Self {
        GrammarError::UnsupportedSchemaKeyword {
            keyword: keyword.to_string(),
            path: display_path(path),
            reason: reason.into(),
        }
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() { "#".to_string() } else { path.to_string() }
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GrammarError::*;
        match self {
            InvalidRegex { pattern, offset, reason } => {
                write!(f, "invalid regex at byte {offset}: {reason}\n    {pattern}\n    ")?;
                let col = pattern.get(..*offset).map_or(*offset, |p| p.chars().count());
                write!(f, "{}^", " ".repeat(col))
            }
            UnsupportedRegex { construct, reason } => {
                write!(f, "unsupported regex construct ({construct}): {reason}")
            }
            TooLarge { what, limit, detail } => {
                write!(f, "{what} exceeds its size limit of {limit}: {detail}")
            }
            EmptyLanguage { detail } => write!(f, "the grammar matches no string at all: {detail}"),
            NotCompletable { detail } => write!(
                f,
                "no sequence of this vocabulary's tokens can complete the grammar: {detail}"
            ),
            UnsupportedSchemaKeyword { keyword, path, reason } => {
                write!(f, "unsupported JSON Schema keyword '{keyword}' at {path}: {reason}")
            }
            InvalidSchema { path, reason } => write!(f, "invalid JSON Schema at {path}: {reason}"),
            Vocabulary { reason } => write!(f, "cannot build vocabulary: {reason}"),
            TokenNotAllowed { state, token, reason } => {
                write!(f, "token {token} is not allowed in state {state}: {reason}")
            }
            InvalidState { state, num_states } => {
                write!(f, "state {state} does not exist (the grammar has {num_states} states)")
            }
            InvalidStructure { path, reason } => write!(f, "invalid structure at {path}: {reason}"),
            InStructure { path, error } => write!(f, "in the structure at {path}: {error}"),
            InvalidGrammar { syntax, line, column, rule, reason } => {
                write!(f, "invalid {syntax} grammar")?;
                if *line > 0 {
                    write!(f, " at line {line}, column {column}")?;
                }
                if let Some(rule) = rule {
                    write!(f, " (rule '{rule}')")?;
                }
                write!(f, ": {reason}")
            }
            NotRegular { detail } => write!(f, "not a regular language: {detail}"),
            NotText { detail } => write!(f, "not text: {detail}"),
        }
    }
}

impl std::error::Error for GrammarError {}

pub type Result<T> = std::result::Result<T, GrammarError>;
