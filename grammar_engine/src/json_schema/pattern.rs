//! JSON Schema `pattern`s: a recursive-descent parser for the ECMA-262 regex dialect the
//! specification names, producing a small AST over code points.
//!
//! The JSON Schema specification says patterns are ECMA-262 regexes, preferably with the `u`
//! flag. regex-syntax's dialect differs in ways that change languages (`\d`, `\w`, `\s`, `.`,
//! `$`, `[^]`, `{`), so patterns are parsed here and only the resulting character sets are
//! handed on. The accepted dialect is ECMA-262 with `u`, plus the Annex B leniencies real-world
//! schemas rely on where their meaning is unambiguous:
//!
//! - identity escapes of any ASCII punctuation or non-ASCII character (`\-`, `\_`, `\é`);
//! - `]`, `}` and a `{` that does not start a quantifier are literals (`a{}` is `a{}`);
//! - legacy octal escapes `\0`–`\0377` (read as Python's `re` reads them too).
//!
//! Refused as invalid: unknown letter escapes (`\a`, `\e`, `\z`), a class escape as a range
//! bound (`[\w-.]`), `{,n}` (a quantifier to Python's `re`, a literal to ECMA-262), nothing to
//! repeat, unbalanced groups and classes. Refused as unsupported: backreferences (`\1`, `\k<n>`)
//! and inline modifiers `(?i:...)`. Lookaround is parsed ([`Node::Around`]); whether a given
//! use can be compiled is the lowering's business.
//!
//! **Character class readings.** Outputs are judged by Python's `jsonschema`, whose `pattern`
//! check is Python's `re`, while the specification (and the official test suite) say ECMA-262.
//! Where the two read a class escape differently (`\d`, `\w`, `\s` and their negations), the
//! set used is one both accept: the intersection of their readings where the class counts
//! positively, and the complement of their union where it counts negatively (`\D`, `[^\d]`).
//! So `\d` is `[0-9]` (ECMA), `\D` excludes every Unicode decimal digit (Python), `\s` is ECMA's
//! whitespace without U+FEFF (Python does not count it), `\S` excludes U+FEFF, U+001C–U+001F and
//! U+0085 too. Python's readings are its Unicode categories (`\w`: letters, numbers and `_`;
//! `\d`: decimal numbers; `\s`: separators and nine controls), taken from regex-syntax's Unicode
//! 16 tables, which match every Python up to 3.14 (Unicode 16). Inside a negative
//! lookaround everything counts the other way round: there `\s` is the union of the readings,
//! `.` is Python's (`[^\n]`, where ECMA's also leaves out `\r`, U+2028, U+2029), `$` also
//! matches before a final `\n` (as Python's does) and `\b`/`\B` hold when either engine says so.
//! A surrogate pair written as two `\u` escapes is one character to ECMA-262 and two lone
//! surrogates to Python, which no string contains: it matches nothing (where it counts
//! positively). `\p{..}` uses regex-syntax's Unicode 16 tables (its lenient name matching accepts
//! a superset of ECMA's property names); Python's `re` has no `\p`.

use std::sync::OnceLock;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, HirKind};

/// Largest repetition count accepted in a quantifier.
pub(crate) const MAX_REPEAT: u32 = 100_000;

/// Deepest group nesting accepted.
const MAX_NESTING: usize = 200;

/// A parsed pattern. Capturing groups are gone: they do not change the language.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// The empty string.
    Empty,
    /// Exactly one code point of the set.
    Set(ClassUnicode),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    /// `min` to `max` (`None`: unbounded) repetitions.
    Repeat(Box<Node>, u32, Option<u32>),
    /// A zero-width assertion on the neighbouring characters.
    Look(Look),
    /// Lookahead or lookbehind, positive or negative.
    Around(Around, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// `^`: the start of the string (patterns have no multiline flag).
    Start,
    /// `$`: the end of the string.
    End,
    /// `\b` where it counts positively: a boundary to both ECMA-262 and Python's `re`.
    WordBoundary,
    /// `\B` where it counts positively: no boundary to either.
    NotWordBoundary,
    /// `\b` inside a negative lookaround: a boundary to either engine.
    AnyWordBoundary,
    /// `\B` inside a negative lookaround: no boundary to one engine or the other.
    AnyNotWordBoundary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Around {
    pub(crate) ahead: bool,
    pub(crate) negate: bool,
}

impl Around {
    pub(crate) fn syntax(self) -> &'static str {
        match (self.ahead, self.negate) {
            (true, false) => "lookahead (?=...)",
            (true, true) => "negative lookahead (?!...)",
            (false, false) => "lookbehind (?<=...)",
            (false, true) => "negative lookbehind (?<!...)",
        }
    }
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// Not a regex in the accepted dialect. `offset` is a byte offset into the pattern.
    Invalid { offset: usize, reason: String },
    /// A valid regex using a construct no finite automaton (or not this compiler) expresses.
    Unsupported { offset: usize, construct: &'static str },
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatternError::Invalid { offset, reason } => write!(f, "{reason} (at byte {offset})"),
            PatternError::Unsupported { offset, construct } => {
                write!(f, "{construct} (at byte {offset}) cannot be expressed by a finite automaton")
            }
        }
    }
}

type PResult<T> = Result<T, PatternError>;

/// Parses an ECMA-262 pattern.
pub(crate) fn parse(pattern: &str) -> PResult<Node> {
    let mut p = Parser { chars: pattern.char_indices().collect(), pos: 0, end: pattern.len(), depth: 0, negative: false };
    let node = p.disjunction()?;
    if p.pos < p.chars.len() {
        // Only an unmatched ')' stops the top-level disjunction early.
        return Err(p.invalid("unmatched ')'"));
    }
    Ok(node)
}

/// True when the tree contains a look-around or an assertion (anywhere).
pub(crate) fn has_assertions(node: &Node) -> bool {
    match node {
        Node::Empty | Node::Set(_) => false,
        Node::Look(_) | Node::Around(..) => true,
        Node::Concat(v) | Node::Alt(v) => v.iter().any(has_assertions),
        Node::Repeat(n, _, _) => has_assertions(n),
    }
}

/// A single-character set.
pub(crate) fn char_set(c: char) -> ClassUnicode {
    ClassUnicode::new([ClassUnicodeRange::new(c, c)])
}

fn ranges(pairs: &[(char, char)]) -> ClassUnicode {
    ClassUnicode::new(pairs.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)))
}

fn negated(mut set: ClassUnicode) -> ClassUnicode {
    set.negate();
    set
}

fn union(mut a: ClassUnicode, b: &ClassUnicode) -> ClassUnicode {
    a.union(b);
    a
}

/// The set of a regex-syntax class expression (used for Unicode property tables).
fn unicode_class(regex: &str) -> Option<ClassUnicode> {
    let hir = regex_syntax::ParserBuilder::new().unicode(true).build().parse(regex).ok()?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => Some(c.clone()),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).ok()?;
            let mut it = s.chars();
            let c = it.next()?;
            it.next().is_none().then(|| char_set(c))
        }
        _ => None,
    }
}

fn cached(cell: &'static OnceLock<ClassUnicode>, make: fn() -> ClassUnicode) -> ClassUnicode {
    cell.get_or_init(make).clone()
}

/// `[A-Za-z0-9_]`: ECMA-262's `\w` (without the `i` flag).
pub(crate) fn ascii_word() -> ClassUnicode {
    ranges(&[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')])
}

/// The characters Python's `re` counts as `\w` in str patterns: letters, numbers and `_`.
pub(crate) fn python_word_superset() -> ClassUnicode {
    static CELL: OnceLock<ClassUnicode> = OnceLock::new();
    cached(&CELL, || {
        let props = unicode_class(r"[\p{L}\p{N}_]").unwrap_or_else(ClassUnicode::empty);
        union(props, &ascii_word())
    })
}

/// Python's `\d`: the Unicode decimal digits.
fn python_digit_superset() -> ClassUnicode {
    static CELL: OnceLock<ClassUnicode> = OnceLock::new();
    cached(&CELL, || unicode_class(r"[\p{Nd}0-9]").unwrap_or_else(|| ranges(&[('0', '9')])))
}

/// ECMA-262 `\s`: WhiteSpace (TAB, VT, FF, ZWNBSP, any Zs) and LineTerminator.
fn ecma_space() -> ClassUnicode {
    static CELL: OnceLock<ClassUnicode> = OnceLock::new();
    cached(&CELL, || {
        let zs = unicode_class(r"\p{Zs}").unwrap_or_else(ClassUnicode::empty);
        union(zs, &ranges(&[('\t', '\r'), ('\u{2028}', '\u{2029}'), ('\u{FEFF}', '\u{FEFF}')]))
    })
}

/// Characters both ECMA-262 and Python's `re` count as `\s`.
fn common_space() -> ClassUnicode {
    let mut s = ecma_space();
    s.difference(&char_set('\u{FEFF}'));
    s
}

/// What either ECMA-262 or Python's `re` counts as `\s` (Python adds U+001C–U+001F and U+0085;
/// all separators are added for safety).
fn any_space() -> ClassUnicode {
    static CELL: OnceLock<ClassUnicode> = OnceLock::new();
    cached(&CELL, || {
        let z = unicode_class(r"\p{Z}").unwrap_or_else(ClassUnicode::empty);
        let extra = ranges(&[('\u{1C}', '\u{1F}'), ('\u{85}', '\u{85}')]);
        union(union(ecma_space(), &z), &extra)
    })
}

/// ECMA-262 `.` without the `s` flag: anything but a line terminator.
pub(crate) fn dot() -> ClassUnicode {
    negated(ranges(&[('\n', '\n'), ('\r', '\r'), ('\u{2028}', '\u{2029}')]))
}

/// The set of `\d \D \w \W \s \S`; `positive` says whether the set counts positively where it
/// appears (outside a class or inside a non-negated one).
fn perl_class(kind: char, positive: bool) -> ClassUnicode {
    let digits = || ranges(&[('0', '9')]);
    match (kind, positive) {
        ('d', true) => digits(),
        ('d', false) => python_digit_superset(),
        ('D', true) => negated(python_digit_superset()),
        ('D', false) => negated(digits()),
        ('w', true) => ascii_word(),
        ('w', false) => python_word_superset(),
        ('W', true) => negated(python_word_superset()),
        ('W', false) => negated(ascii_word()),
        ('s', true) => common_space(),
        ('s', false) => any_space(),
        ('S', true) => negated(any_space()),
        _ => negated(common_space()),
    }
}

/// One item of a bracketed class. A character written as a surrogate pair is flagged.
enum ClassAtom {
    Char(char, bool),
    Set(ClassUnicode),
}

struct Parser {
    chars: Vec<(usize, char)>,
    pos: usize,
    end: usize,
    depth: usize,
    /// Inside an odd number of negative lookarounds: sets count negatively.
    negative: bool,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).map(|&(_, c)| c)
    }

    fn offset(&self) -> usize {
        self.chars.get(self.pos).map_or(self.end, |&(o, _)| o)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_str(&mut self, s: &str) -> bool {
        let n = s.chars().count();
        if s.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c)) {
            self.pos += n;
            true
        } else {
            false
        }
    }

    fn invalid(&self, reason: impl Into<String>) -> PatternError {
        PatternError::Invalid { offset: self.offset(), reason: reason.into() }
    }

    fn invalid_at(&self, pos: usize, reason: impl Into<String>) -> PatternError {
        let offset = self.chars.get(pos).map_or(self.end, |&(o, _)| o);
        PatternError::Invalid { offset, reason: reason.into() }
    }

    fn disjunction(&mut self) -> PResult<Node> {
        let mut alts = vec![self.alternative()?];
        while self.eat('|') {
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 { alts.pop().unwrap_or(Node::Empty) } else { Node::Alt(alts) })
    }

    fn alternative(&mut self) -> PResult<Node> {
        let mut terms = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            terms.push(self.term()?);
        }
        Ok(match terms.len() {
            0 => Node::Empty,
            1 => terms.pop().unwrap_or(Node::Empty),
            _ => Node::Concat(terms),
        })
    }

    fn term(&mut self) -> PResult<Node> {
        let start = self.pos;
        let neg = self.negative;
        let assertion = match (self.peek(), self.peek_at(1)) {
            (Some('^'), _) => Some((1, Look::Start)),
            (Some('$'), _) => Some((1, Look::End)),
            (Some('\\'), Some('b')) => Some((2, if neg { Look::AnyWordBoundary } else { Look::WordBoundary })),
            (Some('\\'), Some('B')) => Some((2, if neg { Look::AnyNotWordBoundary } else { Look::NotWordBoundary })),
            _ => None,
        };
        if let Some((len, look)) = assertion {
            self.pos += len;
            self.refuse_quantifier()?;
            if look == Look::End && neg {
                // Python's `$` also matches before a final newline.
                let before_newline = Node::Concat(vec![Node::Set(char_set('\n')), Node::Look(Look::End)]);
                return Ok(Node::Alt(vec![Node::Look(Look::End), before_newline]));
            }
            return Ok(Node::Look(look));
        }
        let atom = match self.peek() {
            Some('(') => self.group()?,
            _ => self.atom()?,
        };
        if matches!(atom, Node::Around(..)) {
            self.refuse_quantifier()?;
            return Ok(atom);
        }
        let Some((min, max, _lazy)) = self.quantifier(start)? else { return Ok(atom) };
        self.refuse_quantifier()?;
        Ok(Node::Repeat(Box::new(atom), min, max))
    }

    /// Errors when a quantifier follows something that cannot be repeated.
    fn refuse_quantifier(&mut self) -> PResult<()> {
        match self.peek() {
            Some('*' | '+' | '?') => Err(self.invalid("nothing to repeat")),
            Some('{') if self.braced_quantifier_ahead() => Err(self.invalid("nothing to repeat")),
            _ => Ok(()),
        }
    }

    /// True when the text at the cursor is `{n}`, `{n,}` or `{n,m}`; errors for `{,m}` / `{,}`,
    /// which Python's `re` reads as a quantifier and ECMA-262 as literal text.
    fn braced_quantifier_ahead(&self) -> bool {
        let mut k = 1;
        let mut lo = 0;
        while self.peek_at(k).is_some_and(|c| c.is_ascii_digit()) {
            k += 1;
            lo += 1;
        }
        if lo == 0 {
            return false;
        }
        if self.peek_at(k) == Some(',') {
            k += 1;
            while self.peek_at(k).is_some_and(|c| c.is_ascii_digit()) {
                k += 1;
            }
        }
        self.peek_at(k) == Some('}')
    }

    fn python_only_quantifier_ahead(&self) -> bool {
        if self.peek() != Some('{') || self.peek_at(1) != Some(',') {
            return false;
        }
        let mut k = 2;
        while self.peek_at(k).is_some_and(|c| c.is_ascii_digit()) {
            k += 1;
        }
        self.peek_at(k) == Some('}')
    }

    /// Parses a quantifier if one follows: `(min, max, lazy)`.
    fn quantifier(&mut self, atom_start: usize) -> PResult<Option<(u32, Option<u32>, bool)>> {
        let (min, max) = match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') if self.braced_quantifier_ahead() => {
                self.pos += 1;
                let min = self.number()?;
                let max = if self.eat(',') {
                    if self.peek() == Some('}') { None } else { Some(self.number()?) }
                } else {
                    Some(min)
                };
                self.pos += 1; // '}'
                if max.is_some_and(|m| m < min) {
                    return Err(self.invalid_at(atom_start, "numbers out of order in {} quantifier"));
                }
                (min, max)
            }
            Some('{') if self.python_only_quantifier_ahead() => {
                return Err(self.invalid("{,n} is a quantifier to Python's re but literal text to ECMA-262; write {0,n}"));
            }
            _ => return Ok(None),
        };
        let lazy = self.eat('?');
        Ok(Some((min, max, lazy)))
    }

    fn number(&mut self) -> PResult<u32> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            self.pos += 1;
            value = (value * 10 + u64::from(d)).min(u64::from(u32::MAX));
        }
        if value > u64::from(MAX_REPEAT) {
            return Err(self.invalid_at(start, format!("repetition count above {MAX_REPEAT}")));
        }
        Ok(value as u32)
    }

    fn group(&mut self) -> PResult<Node> {
        let open = self.pos;
        self.pos += 1; // '('
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(PatternError::Unsupported { offset: self.offset(), construct: "nesting deeper than 200 groups" });
        }
        let around = if self.eat_str("?=") {
            Some(Around { ahead: true, negate: false })
        } else if self.eat_str("?!") {
            Some(Around { ahead: true, negate: true })
        } else if self.eat_str("?<=") {
            Some(Around { ahead: false, negate: false })
        } else if self.eat_str("?<!") {
            Some(Around { ahead: false, negate: true })
        } else if self.eat_str("?:") {
            None
        } else if self.eat_str("?<") {
            self.group_name()?;
            None
        } else if self.peek() == Some('?') {
            return Err(match self.peek_at(1) {
                Some(c) if c.is_ascii_alphabetic() || c == '-' => PatternError::Unsupported {
                    offset: self.offset(),
                    construct: "inline modifiers (?flags:...)",
                },
                _ => self.invalid("invalid group"),
            });
        } else {
            None
        };
        let flip = around.is_some_and(|a| a.negate);
        self.negative ^= flip;
        let inner = self.disjunction()?;
        self.negative ^= flip;
        if !self.eat(')') {
            return Err(self.invalid_at(open, "unterminated group"));
        }
        self.depth -= 1;
        Ok(match around {
            Some(a) => Node::Around(a, Box::new(inner)),
            None => inner,
        })
    }

    /// A group name after `(?<`, through the closing `>`.
    fn group_name(&mut self) -> PResult<()> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == '>' {
                break;
            }
            let ok = c == '_' || c == '$' || c.is_alphabetic() || (self.pos > start && c.is_alphanumeric());
            if !ok {
                return Err(self.invalid("invalid group name"));
            }
            self.pos += 1;
        }
        if self.pos == start || !self.eat('>') {
            return Err(self.invalid_at(start, "invalid group name"));
        }
        Ok(())
    }

    fn atom(&mut self) -> PResult<Node> {
        let Some(c) = self.peek() else { return Err(self.invalid("unexpected end")) };
        match c {
            '.' => {
                self.pos += 1;
                Ok(Node::Set(if self.negative { negated(char_set('\n')) } else { dot() }))
            }
            '[' => self.class(),
            '\\' => self.atom_escape(),
            '*' | '+' | '?' => Err(self.invalid("nothing to repeat")),
            '{' if self.braced_quantifier_ahead() => Err(self.invalid("nothing to repeat")),
            '{' if self.python_only_quantifier_ahead() => {
                Err(self.invalid("{,n} is a quantifier to Python's re but literal text to ECMA-262"))
            }
            _ => {
                self.pos += 1;
                Ok(Node::Set(char_set(c)))
            }
        }
    }

    fn atom_escape(&mut self) -> PResult<Node> {
        let at = self.pos;
        self.pos += 1; // '\'
        let Some(c) = self.peek() else { return Err(self.invalid_at(at, "pattern ends with \\")) };
        match c {
            '1'..='9' => Err(PatternError::Unsupported { offset: self.offset(), construct: "backreference \\N" }),
            'k' if self.peek_at(1) == Some('<') => {
                Err(PatternError::Unsupported { offset: self.offset(), construct: "named backreference \\k<name>" })
            }
            'd' | 'D' | 'w' | 'W' | 's' | 'S' => {
                self.pos += 1;
                Ok(Node::Set(perl_class(c, !self.negative)))
            }
            'p' | 'P' => Ok(Node::Set(self.property()?)),
            _ => {
                let (c, pair) = self.character_escape(at, false)?;
                let matchable = !pair || self.negative;
                Ok(Node::Set(if matchable { char_set(c) } else { ClassUnicode::empty() }))
            }
        }
    }

    /// A character escape after `\` (the cursor is on the letter), and whether it was a
    /// surrogate pair of `\u` escapes. `in_class` allows `\b` (backspace).
    fn character_escape(&mut self, at: usize, in_class: bool) -> PResult<(char, bool)> {
        let Some(c) = self.bump() else { return Err(self.invalid_at(at, "pattern ends with \\")) };
        let control = |code: u32| char::from_u32(code).unwrap_or('\0');
        if c == 'u' {
            return self.unicode_escape(at);
        }
        Ok((match c {
            'f' => '\u{C}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{B}',
            'b' if in_class => '\u{8}',
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.pos += 1;
                    control(l as u32 % 32)
                }
                _ => return Err(self.invalid_at(at, "\\c must be followed by an ASCII letter")),
            },
            '0' => {
                // `\0`, or a legacy octal escape of up to three digits (value <= 0o377).
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            digits += 1;
                            self.pos += 1;
                        }
                        None => break,
                    }
                }
                control(value)
            }
            'x' => {
                let v = self.hex_digits(2).ok_or_else(|| self.invalid_at(at, "\\x must be followed by two hex digits"))?;
                control(v)
            }
            c if c.is_ascii_alphanumeric() => {
                return Err(self.invalid_at(at, format!("\\{c} is not an ECMA-262 escape")));
            }
            // Identity escapes: syntax characters, '/', '-', other punctuation, non-ASCII.
            c => c,
        }, false))
    }

    fn hex_digits(&mut self, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for k in 0..n {
            v = v * 16 + self.peek_at(k)?.to_digit(16)?;
        }
        self.pos += n;
        Some(v)
    }

    /// `\uXXXX` (a surrogate pair of two such escapes is one code point, flagged) or `\u{X...}`.
    fn unicode_escape(&mut self, at: usize) -> PResult<(char, bool)> {
        if self.eat('{') {
            let start = self.pos;
            let mut v: u32 = 0;
            while let Some(d) = self.peek().and_then(|c| c.to_digit(16)) {
                v = v.saturating_mul(16).saturating_add(d);
                self.pos += 1;
            }
            if self.pos == start || !self.eat('}') || v > 0x10FFFF {
                return Err(self.invalid_at(at, "invalid \\u{...} escape"));
            }
            let c = char::from_u32(v).ok_or_else(|| self.invalid_at(at, "\\u{...} names a lone surrogate, which no string contains"))?;
            return Ok((c, false));
        }
        let v = self.hex_digits(4).ok_or_else(|| self.invalid_at(at, "\\u must be followed by four hex digits"))?;
        if (0xD800..0xDC00).contains(&v) && self.peek() == Some('\\') && self.peek_at(1) == Some('u') {
            let save = self.pos;
            self.pos += 2;
            match self.hex_digits(4) {
                Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                    let code = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                    let c = char::from_u32(code).ok_or_else(|| self.invalid_at(at, "invalid surrogate pair"))?;
                    return Ok((c, true));
                }
                _ => self.pos = save,
            }
        }
        let c = char::from_u32(v).ok_or_else(|| self.invalid_at(at, "\\u escape of a lone surrogate, which no string contains"))?;
        Ok((c, false))
    }

    /// `\p{...}` / `\P{...}` (the cursor is on `p` or `P`).
    fn property(&mut self) -> PResult<ClassUnicode> {
        let at = self.pos - 1;
        let neg = self.bump() == Some('P');
        if !self.eat('{') {
            return Err(self.invalid_at(at, "\\p must be followed by {name}"));
        }
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '=') {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().map(|&(_, c)| c).collect();
        if name.is_empty() || !self.eat('}') {
            return Err(self.invalid_at(at, "invalid \\p{...} escape"));
        }
        let set = unicode_class(&format!("\\p{{{name}}}"))
            .ok_or_else(|| self.invalid_at(at, format!("unknown Unicode property {name:?}")))?;
        Ok(if neg { negated(set) } else { set })
    }

    fn class(&mut self) -> PResult<Node> {
        let open = self.pos;
        self.pos += 1; // '['
        let negate = self.eat('^');
        let positive = negate == self.negative;
        let mut set = ClassUnicode::empty();
        loop {
            match self.peek() {
                None => return Err(self.invalid_at(open, "unterminated character class")),
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                _ => {}
            }
            let first_pos = self.pos;
            let first = self.class_atom(positive)?;
            let is_range = self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']');
            if !is_range {
                add_atom(&mut set, first, positive);
                continue;
            }
            self.pos += 1; // '-'
            let second = self.class_atom(positive)?;
            match (first, second) {
                (ClassAtom::Char(a, pa), ClassAtom::Char(b, pb)) => {
                    if a > b {
                        return Err(self.invalid_at(first_pos, "range out of order in character class"));
                    }
                    if !((pa || pb) && positive) {
                        set.push(ClassUnicodeRange::new(a, b));
                    }
                }
                _ => return Err(self.invalid_at(first_pos, "a class escape cannot bound a range (write \\- for a literal -)")),
            }
        }
        if negate {
            set.negate();
        }
        Ok(Node::Set(set))
    }

    fn class_atom(&mut self, positive: bool) -> PResult<ClassAtom> {
        let Some(c) = self.bump() else { return Err(self.invalid("unterminated character class")) };
        if c != '\\' {
            return Ok(ClassAtom::Char(c, false));
        }
        let at = self.pos - 1;
        match self.peek() {
            Some(k @ ('d' | 'D' | 'w' | 'W' | 's' | 'S')) => {
                self.pos += 1;
                Ok(ClassAtom::Set(perl_class(k, positive)))
            }
            Some('p' | 'P') => Ok(ClassAtom::Set(self.property()?)),
            Some('1'..='9') => Err(self.invalid_at(at, "octal or backreference escape in a character class")),
            _ => {
                let (c, pair) = self.character_escape(at, true)?;
                Ok(ClassAtom::Char(c, pair))
            }
        }
    }
}

/// Adds a class item; a surrogate-pair character only where the class counts negatively.
fn add_atom(set: &mut ClassUnicode, atom: ClassAtom, positive: bool) {
    match atom {
        ClassAtom::Char(c, pair) if !(pair && positive) => set.push(ClassUnicodeRange::new(c, c)),
        ClassAtom::Char(..) => {}
        ClassAtom::Set(s) => set.union(&s),
    }
}

#[cfg(test)]
mod tests;
