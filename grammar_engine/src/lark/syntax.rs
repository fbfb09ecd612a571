//! The Lark grammar text read into definitions (a hand-written recursive descent, errors at the
//! byte where the text goes wrong).
//!
//! Layout as Lark's own grammar lexer reads it: a newline ends a statement unless the next
//! line that is not blank or a comment starts with `|` (another alternative); blanks, `//` and
//! `#` comments and a backslash before a newline separate items.

use serde_json::Value;

use super::regex::{string_text, translate};

/// A whole grammar: its definitions and directives, in order.
#[derive(Debug, Default)]
pub(super) struct Ast {
    pub defs: Vec<Def>,
    /// `%ignore` bodies (each a terminal expression).
    pub ignores: Vec<Alts>,
    /// `%import common...`: (name in `common`, local name, where).
    pub imports: Vec<(String, String, usize)>,
}

/// A rule (`terminal == false`, lowercase name) or a terminal definition.
#[derive(Debug)]
pub(super) struct Def {
    pub name: String,
    pub at: usize,
    pub terminal: bool,
    pub body: Alts,
}

pub(super) type Alts = Vec<Seq>;
pub(super) type Seq = Vec<Item>;

/// An atom with its repetition (`min == max == 1` when it has none).
#[derive(Debug)]
pub(super) struct Item {
    pub atom: Atom,
    pub at: usize,
    pub min: u32,
    pub max: Option<u32>,
}

#[derive(Debug)]
pub(super) enum Atom {
    /// A rule (lowercase) or terminal (uppercase) used by name.
    Name(String),
    Literal { text: String, insensitive: bool },
    /// A regex literal, already in `regex-automata` syntax.
    Regex(String),
    Range(char, char),
    Group(Alts),
    /// `[...]`: the alternatives or nothing.
    Maybe(Alts),
    /// `%json {...}`: an embedded JSON Schema.
    Json(Value),
    /// `<...>`: a token, by text or `[id]` (the text between the angle brackets).
    Token(String),
}

/// A syntax error: where (byte offset), in which definition, and why.
pub(super) struct SyntaxError {
    pub at: usize,
    pub rule: Option<String>,
    pub reason: String,
}

type Result<T> = std::result::Result<T, SyntaxError>;

pub(super) fn parse(text: &str) -> Result<Ast> {
    let mut p = Parser { src: text.as_bytes(), text, pos: 0, rule: None, ast: Ast::default() };
    p.blank_lines();
    while p.pos < p.src.len() {
        p.rule = None;
        p.statement()?;
        p.blank_lines();
    }
    Ok(p.ast)
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    /// The definition being read, for errors.
    rule: Option<String>,
    ast: Ast,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn error<T>(&self, at: usize, reason: impl Into<String>) -> Result<T> {
        Err(SyntaxError { at, rule: self.rule.clone(), reason: reason.into() })
    }

    /// The character at `at`, for messages.
    fn char_at(&self, at: usize) -> String {
        self.text.get(at..).and_then(|s| s.chars().next()).map_or_else(|| "end of grammar".into(), |c| format!("`{c}`"))
    }

    /// Skips blanks, comments and escaped newlines, up to (not over) a newline.
    fn space(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'#' => self.skip_line(),
                b'/' if self.peek_at(1) == Some(b'/') => self.skip_line(),
                b'\\' => {
                    let rest = &self.src[self.pos + 1..];
                    let blanks = rest.iter().take_while(|&&b| b == b' ' || b == b'\r').count();
                    if rest.get(blanks) == Some(&b'\n') {
                        self.pos += blanks + 2;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
        }
    }

    fn skip_line(&mut self) {
        while self.peek().is_some_and(|c| c != b'\n') {
            self.pos += 1;
        }
    }

    /// Skips blank lines and comment lines.
    fn blank_lines(&mut self) {
        loop {
            self.space();
            if self.peek() == Some(b'\n') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// At a newline: when the next line that is not blank starts with `|`, moves past that `|`.
    fn continuation(&mut self) -> bool {
        if self.peek() != Some(b'\n') {
            return false;
        }
        let save = self.pos;
        self.blank_lines();
        if self.peek() == Some(b'|') {
            self.pos += 1;
            true
        } else {
            self.pos = save;
            false
        }
    }

    /// The end of a statement: a newline or the end of the text.
    fn end_of_statement(&mut self) -> Result<()> {
        self.space();
        match self.peek() {
            None => Ok(()),
            Some(b'\n') => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => self.error(self.pos, format!("unexpected {} (expected the end of the line)", self.char_at(self.pos))),
        }
    }

    /// A name: letters, digits, `_`, and `-` inside (llguidance allows it; `->` is an alias).
    fn name(&mut self) -> Option<String> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            let inner_dash = c == b'-'
                && self.pos > start
                && self.peek_at(1).is_some_and(|n| n.is_ascii_alphanumeric() || n == b'_');
            if c.is_ascii_alphanumeric() || c == b'_' || inner_dash {
                self.pos += 1;
            } else {
                break;
            }
        }
        (self.pos > start).then(|| self.text[start..self.pos].to_string())
    }

    /// Whether `name` is a terminal (uppercase), a rule (lowercase), or neither.
    fn kind(&self, name: &str, at: usize) -> Result<bool> {
        let letters = name.trim_start_matches('_');
        let first = letters.chars().next();
        let terminal = first.is_some_and(|c| c.is_ascii_uppercase()) && !name.chars().any(|c| c.is_ascii_lowercase());
        let rule = first.is_some_and(|c| c.is_ascii_lowercase()) && !name.chars().any(|c| c.is_ascii_uppercase());
        if !terminal && !rule {
            return self.error(at, format!("`{name}` is neither a rule name (lowercase) nor a terminal name (UPPERCASE)"));
        }
        Ok(terminal)
    }

    fn statement(&mut self) -> Result<()> {
        if self.peek() == Some(b'%') {
            return self.directive();
        }
        let at = self.pos;
        while matches!(self.peek(), Some(b'?' | b'!')) {
            self.pos += 1;
        }
        let modified = self.pos > at;
        let name_at = self.pos;
        let Some(name) = self.name() else {
            return self.error(self.pos, format!("expected a rule or terminal definition, found {}", self.char_at(self.pos)));
        };
        let terminal = self.kind(&name, name_at)?;
        self.rule = Some(name.clone());
        if modified && terminal {
            return self.error(at, "the modifiers `?` and `!` apply to rules, not terminals");
        }
        match self.peek() {
            Some(b'{') => return self.error(self.pos, "templates (`rule{params}`) are not supported"),
            Some(b'[') => return self.error(self.pos, "rule options (`name[...]`, llguidance's lexeme options) are not supported"),
            _ => {}
        }
        if self.peek() == Some(b'.') {
            // A priority: only tree shaping for a rule; for a terminal it picks between
            // lexings, which a character-level reading does not have.
            let dot = self.pos;
            self.pos += 1;
            if self.number().is_none() {
                return self.error(self.pos, "expected a priority number after `.`");
            }
            if terminal {
                return self.error(dot, "terminal priorities are not supported (every way of reading the text is kept; there is no lexer to choose between terminals)");
            }
        }
        self.space();
        if self.peek() != Some(b':') {
            return self.error(self.pos, format!("expected `:` after `{name}`"));
        }
        self.pos += 1;
        let body = self.alternates()?;
        self.end_of_statement()?;
        self.ast.defs.push(Def { name, at: name_at, terminal, body });
        Ok(())
    }

    fn number(&mut self) -> Option<i64> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'+' | b'-')) {
            self.pos += 1;
        }
        let digits = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if self.pos == digits {
            self.pos = start;
            return None;
        }
        self.text[start..self.pos].parse().ok()
    }

    fn directive(&mut self) -> Result<()> {
        let at = self.pos;
        self.pos += 1;
        let word = self.name().unwrap_or_default();
        match word.as_str() {
            "ignore" => {
                let body = self.alternates()?;
                self.ast.ignores.push(body);
            }
            "import" => self.import()?,
            "llguidance" => {
                self.space();
                let value = self.json()?;
                if value.as_object().is_none_or(|o| !o.is_empty()) {
                    return self.error(at, "`%llguidance` options are not supported (only `%llguidance {}`)");
                }
            }
            "declare" => return self.error(at, "`%declare` is not supported (a declared terminal has no definition to generate from)"),
            "override" | "extend" => return self.error(at, format!("`%{word}` is not supported")),
            "json" | "regex" => return self.error(at, format!("`%{word}` belongs inside a rule's body")),
            _ => return self.error(at, format!("unknown directive `%{word}`")),
        }
        self.end_of_statement()
    }

    /// `%import common.NAME [-> ALIAS]` or `%import common (A, B)`, after `%import`.
    fn import(&mut self) -> Result<()> {
        self.space();
        let at = self.pos;
        if self.peek() == Some(b'.') {
            return self.error(at, "relative imports are not supported (only Lark's `common` library)");
        }
        let mut path = vec![self.name().unwrap_or_default()];
        while self.peek() == Some(b'.') {
            self.pos += 1;
            path.push(self.name().unwrap_or_default());
        }
        if path.iter().any(String::is_empty) {
            return self.error(at, "expected a dotted name after `%import`");
        }
        self.space();
        let names: Vec<(String, String, usize)> = if self.peek() == Some(b'(') {
            self.pos += 1;
            let mut names = Vec::new();
            loop {
                self.space();
                let name_at = self.pos;
                let Some(name) = self.name() else { return self.error(self.pos, "expected a name in the import list") };
                names.push((name.clone(), name, name_at));
                self.space();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return self.error(self.pos, "expected `,` or `)` in the import list"),
                }
            }
            names
        } else {
            let Some(name) = path.pop() else { return self.error(at, "expected a name to import") };
            let mut local = name.clone();
            if self.src[self.pos..].starts_with(b"->") {
                self.pos += 2;
                self.space();
                local = self.name().ok_or_else(|| SyntaxError { at: self.pos, rule: None, reason: "expected a name after `->`".into() })?;
            }
            vec![(name, local, at)]
        };
        if path != ["common"] {
            return self.error(at, format!("only Lark's `common` library can be imported (not `{}`)", path.join(".")));
        }
        self.ast.imports.extend(names);
        Ok(())
    }

    /// Alternatives up to the end of the statement or a closing bracket.
    fn alternates(&mut self) -> Result<Alts> {
        let mut alts = vec![self.sequence()?];
        loop {
            self.space();
            if self.peek() == Some(b'|') {
                self.pos += 1;
            } else if !self.continuation() {
                break;
            }
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    /// Items up to `|`, a closing bracket, an alias or the end of the line.
    fn sequence(&mut self) -> Result<Seq> {
        let mut items = Vec::new();
        loop {
            self.space();
            let at = self.pos;
            let atom = match self.peek() {
                None | Some(b'\n' | b'|' | b')' | b']') => break,
                Some(b'-') if self.peek_at(1) == Some(b'>') => {
                    // An alias names the tree node; it does not change the language.
                    self.pos += 2;
                    self.space();
                    let name_at = self.pos;
                    match self.name() {
                        Some(n) if !self.kind(&n, name_at)? => {}
                        _ => return self.error(name_at, "an alias (`-> name`) expects a lowercase name"),
                    }
                    self.space();
                    if !matches!(self.peek(), None | Some(b'\n' | b'|' | b')' | b']')) {
                        return self.error(self.pos, "an alias (`-> name`) ends its alternative");
                    }
                    break;
                }
                Some(b'"') => self.string()?,
                Some(b'/') => self.regex()?,
                Some(b'(') => {
                    self.pos += 1;
                    let inner = self.alternates()?;
                    self.close(b')', at)?;
                    Atom::Group(inner)
                }
                Some(b'[') => {
                    self.pos += 1;
                    let inner = self.alternates()?;
                    self.close(b']', at)?;
                    Atom::Maybe(inner)
                }
                Some(b'%') => {
                    self.pos += 1;
                    match self.name().as_deref() {
                        Some("json") => {
                            self.space();
                            Atom::Json(self.json()?)
                        }
                        Some("regex") => return self.error(at, "`%regex` (llguidance's structured regexes) is not supported"),
                        _ => return self.error(at, "a directive cannot appear inside a rule"),
                    }
                }
                Some(b'<') => {
                    let close = self.src[self.pos..].iter().position(|&b| b == b'>' || b == b'\n');
                    let Some(close) = close.filter(|&c| self.src[self.pos + c] == b'>') else {
                        return self.error(at, "unterminated token reference `<...>`");
                    };
                    let inner = self.text[self.pos + 1..self.pos + close].to_string();
                    self.pos += close + 1;
                    Atom::Token(inner)
                }
                Some(b'@') => return self.error(at, "grammar references (`@name`) are not supported"),
                Some(c) if c.is_ascii_alphanumeric() || c == b'_' => {
                    let name = self.name().unwrap_or_default();
                    self.kind(&name, at)?;
                    if self.peek() == Some(b'{') && !self.is_count() {
                        return self.error(self.pos, "templates (`rule{args}`) are not supported");
                    }
                    Atom::Name(name)
                }
                Some(b'+' | b'*' | b'?' | b'~') => return self.error(at, "an operator needs an item before it"),
                Some(b':') => return self.error(at, "unexpected `:` (a definition starts on a new line)"),
                Some(_) => return self.error(at, format!("unexpected {}", self.char_at(at))),
            };
            let (min, max) = self.repetition()?;
            items.push(Item { atom, at, min, max });
        }
        Ok(items)
    }

    fn close(&mut self, bracket: u8, open: usize) -> Result<()> {
        self.space();
        if self.peek() == Some(bracket) {
            self.pos += 1;
            Ok(())
        } else {
            let what = if bracket == b')' { "`(` is never closed by `)`" } else { "`[` is never closed by `]`" };
            self.error(open, what)
        }
    }

    /// Whether the `{` here starts a repetition count (`{n}`, `{m,}`, `{,n}`, `{m,n}`).
    fn is_count(&self) -> bool {
        let rest = &self.src[self.pos + 1..];
        let end = rest.iter().position(|&b| b == b'}');
        end.is_some_and(|e| {
            let inner = &rest[..e];
            !inner.is_empty() && inner.iter().all(|&b| b.is_ascii_digit() || b == b',' || b == b' ')
        })
    }

    /// An operator after an atom: `?`, `*`, `+`, `~ n`, `~ m..n`, or llguidance's `{m,n}`.
    fn repetition(&mut self) -> Result<(u32, Option<u32>)> {
        self.space();
        let at = self.pos;
        let rep = match self.peek() {
            Some(b'?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some(b'*') => {
                self.pos += 1;
                (0, None)
            }
            Some(b'+') => {
                self.pos += 1;
                (1, None)
            }
            Some(b'~') => {
                self.pos += 1;
                self.space();
                let lo = self.count(at)?;
                self.space();
                let hi = if self.src[self.pos..].starts_with(b"..") {
                    self.pos += 2;
                    self.space();
                    self.count(at)?
                } else {
                    lo
                };
                if hi < lo {
                    return self.error(at, format!("the repetition `~ {lo}..{hi}` has its maximum below its minimum"));
                }
                (lo, Some(hi))
            }
            Some(b'{') if self.is_count() => {
                let close = self.src[self.pos..].iter().position(|&b| b == b'}').unwrap_or(0);
                let inner = self.text[self.pos + 1..self.pos + close].replace(' ', "");
                self.pos += close + 1;
                let (lo, hi) = match inner.split_once(',') {
                    None => {
                        let n = inner.parse().ok();
                        (n, n)
                    }
                    Some((lo, hi)) => (if lo.is_empty() { Some(0) } else { lo.parse().ok() }, if hi.is_empty() { None } else { hi.parse().ok() }),
                };
                let Some(lo) = lo else { return self.error(at, "a repetition count must be a number") };
                if hi.is_some_and(|h| h < lo) {
                    return self.error(at, "the repetition has its maximum below its minimum");
                }
                (lo, hi)
            }
            _ => return Ok((1, Some(1))),
        };
        self.space();
        if matches!(self.peek(), Some(b'?' | b'*' | b'+' | b'~')) || (self.peek() == Some(b'{') && self.is_count()) {
            return self.error(self.pos, "misplaced operator: an item takes one operator (group it to repeat again)");
        }
        Ok(rep)
    }

    fn count(&mut self, op: usize) -> Result<u32> {
        match self.number() {
            Some(n) => u32::try_from(n).or_else(|_| self.error(op, format!("a repetition count must be a number from 0 to {}", u32::MAX))),
            None => self.error(self.pos, "expected a number after `~`"),
        }
    }

    /// A string literal, or a range of two one-character strings.
    fn string(&mut self) -> Result<Atom> {
        let at = self.pos;
        let (text, insensitive) = self.quoted()?;
        self.space();
        if !self.src[self.pos..].starts_with(b"..") {
            return Ok(Atom::Literal { text, insensitive });
        }
        self.pos += 2;
        self.space();
        if self.peek() != Some(b'"') {
            return self.error(self.pos, "expected a string after `..`");
        }
        let (hi, _) = self.quoted()?;
        let one = |s: &str| {
            let mut cs = s.chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        };
        let (Some(lo), Some(hi)) = (one(&text), one(&hi)) else {
            return self.error(at, "a range (`\"a\"..\"z\"`) takes one character on each side");
        };
        if hi < lo {
            return self.error(at, format!("the range {lo:?}..{hi:?} runs backwards"));
        }
        Ok(Atom::Range(lo, hi))
    }

    /// A quoted string at `"`: its text and whether the `i` flag follows.
    fn quoted(&mut self) -> Result<(String, bool)> {
        let at = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None | Some(b'\n') => return self.error(at, "unterminated string (a string literal ends on its line)"),
                Some(b'"') => break,
                Some(b'\\') if matches!(self.peek_at(1), Some(b'"' | b'\\')) => self.pos += 2,
                Some(_) => self.pos += 1,
            }
        }
        let raw = &self.text[start..self.pos];
        self.pos += 1;
        let insensitive = self.peek() == Some(b'i');
        if insensitive {
            self.pos += 1;
        }
        let text = string_text(raw).or_else(|e| self.error(at, e))?;
        Ok((text, insensitive))
    }

    /// A regex literal at `/`.
    fn regex(&mut self) -> Result<Atom> {
        let at = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None => return self.error(at, "unterminated regex `/.../`"),
                Some(b'/') => break,
                Some(b'\\') if matches!(self.peek_at(1), Some(b'/' | b'\\')) => self.pos += 2,
                Some(_) => self.pos += 1,
            }
        }
        let raw = &self.text[start..self.pos];
        self.pos += 1;
        let flags_at = self.pos;
        while self.peek().is_some_and(|c| b"imslux".contains(&c)) {
            self.pos += 1;
        }
        let flags = &self.text[flags_at..self.pos];
        let pattern = translate(raw, flags).or_else(|e| self.error(at, e))?;
        Ok(Atom::Regex(pattern))
    }

    /// A JSON value (for `%json` and `%llguidance`).
    fn json(&mut self) -> Result<Value> {
        let at = self.pos;
        let mut values = serde_json::Deserializer::from_slice(&self.src[self.pos..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(v)) => {
                self.pos += values.byte_offset();
                Ok(v)
            }
            Some(Err(e)) => self.error(at, format!("invalid JSON: {e}")),
            None => self.error(at, "expected a JSON value"),
        }
    }
}
