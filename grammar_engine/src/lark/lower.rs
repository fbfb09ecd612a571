//! Definitions to rules: terminals become regular expressions (inlined where used), rules
//! become [`RtnBuilder`] rules that call each other, and `%ignore` becomes an optional
//! repetition in front of every terminal a rule reads and at the end of the text.

use std::collections::HashMap;
use std::rc::Rc;

use super::common;
use super::syntax::{Alts, Ast, Atom, Def, Item};
use crate::automata::{DfaConfig, Expr};
use crate::error::{GrammarError, Result};
use crate::gbnf::token_reference;
use crate::json_schema::{self, JsonSchemaOptions};
use crate::pushdown::RtnBuilder;
use crate::structure::SpecialTokens;
use crate::util::RuleId;
use crate::vocab::Vocabulary;

/// What a terminal name stands for.
enum TermDef<'a> {
    Defined(&'a Def),
    /// Imported from `common`: its regex, and where the import is.
    Common(&'static str, usize),
}

/// A terminal's lowering state (terminals are lowered once, on first use).
enum TermState {
    InProgress,
    Done(Expr),
}

pub(super) struct Lowered {
    pub rules: RtnBuilder,
    pub start: RuleId,
    pub specials: SpecialTokens,
    /// Each rule's definition (byte offset), to locate errors the rule builder finds.
    pub rule_at: HashMap<String, usize>,
}

pub(super) fn lower(ast: &Ast, text: &str, vocab: &Vocabulary, config: &DfaConfig, specials: SpecialTokens) -> Result<Lowered> {
    let mut l = Lower {
        text,
        vocab,
        config,
        rules: HashMap::new(),
        terms: HashMap::new(),
        term_state: HashMap::new(),
        built: HashMap::new(),
        builder: RtnBuilder::new(),
        ids: HashMap::new(),
        ignore: None,
        specials,
        path: Vec::new(),
    };
    l.collect(ast)?;
    // Every terminal is lowered, used or not, so that a broken one is reported either way.
    let mut names: Vec<String> = l.terms.keys().cloned().collect();
    names.sort_by_key(|n| l.term_at(n));
    for name in &names {
        l.terminal(name)?;
    }
    if !ast.ignores.is_empty() {
        let mut ignored = Vec::new();
        for alts in &ast.ignores {
            ignored.push(l.terminal_alts(alts, None)?);
        }
        let skip = Expr::repeat(Expr::union(ignored), 0, None).built(config)?;
        l.ignore = Some(skip);
    }
    for def in ast.defs.iter().filter(|d| !d.terminal) {
        let id = l.ids[&def.name];
        let body = l.rule_body(def)?;
        l.builder.define(id, body);
    }
    let Some(&start) = l.ids.get("start") else {
        return Err(GrammarError::invalid_grammar(super::SYNTAX, 0, 0, None, "the grammar has no `start` rule"));
    };
    // Ignored text may also end the text: after the start rule, through a rule of its own
    // (other rules may call `start`, and they must not get the trailing text).
    let start = match l.ignore.clone() {
        Some(skip) => {
            let top = l.builder.declare("start");
            l.builder.define(top, Expr::concat(vec![Expr::Call(start), skip]));
            top
        }
        None => start,
    };
    let rule_at = ast.defs.iter().filter(|d| !d.terminal).map(|d| (d.name.clone(), d.at)).collect();
    Ok(Lowered { rules: l.builder, start, specials: l.specials, rule_at })
}

struct Lower<'a> {
    text: &'a str,
    vocab: &'a Vocabulary,
    config: &'a DfaConfig,
    rules: HashMap<&'a str, &'a Def>,
    terms: HashMap<String, TermDef<'a>>,
    term_state: HashMap<String, TermState>,
    /// Terminals as DFA leaves, built once for every rule that reads them.
    built: HashMap<String, Expr>,
    builder: RtnBuilder,
    ids: HashMap<String, RuleId>,
    /// `(ignored terminals)*`, when the grammar ignores anything.
    ignore: Option<Expr>,
    specials: SpecialTokens,
    /// The terminals being lowered, outermost first (to name a recursion).
    path: Vec<String>,
}

impl<'a> Lower<'a> {
    fn error(&self, at: usize, rule: Option<&str>, reason: impl Into<String>) -> GrammarError {
        let (line, col) = super::location(self.text, at);
        GrammarError::invalid_grammar(super::SYNTAX, line, col, rule, reason)
    }

    /// Gathers the definitions and imports, refusing a name defined twice, and declares the
    /// rules.
    fn collect(&mut self, ast: &'a Ast) -> Result<()> {
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut once = |this: &Self, name: &'a str, at: usize| -> Result<()> {
            if let Some(&prev) = first.get(name) {
                let (line, _) = super::location(this.text, prev);
                return Err(this.error(at, Some(name), format!("`{name}` is defined twice (first on line {line})")));
            }
            first.insert(name, at);
            Ok(())
        };
        for def in &ast.defs {
            once(self, &def.name, def.at)?;
            if def.terminal {
                self.terms.insert(def.name.clone(), TermDef::Defined(def));
            } else {
                self.rules.insert(&def.name, def);
                let id = self.builder.declare(&def.name);
                self.ids.insert(def.name.clone(), id);
            }
        }
        for (name, local, at) in &ast.imports {
            let Some(regex) = common::terminal(name) else {
                return Err(self.error(*at, Some(name), format!("Lark's `common` library has no terminal `{name}` (it has {})", common::NAMES)));
            };
            if local.chars().any(|c| c.is_ascii_lowercase()) {
                return Err(self.error(*at, Some(local), "an imported terminal needs an UPPERCASE name"));
            }
            once(self, local, *at)?;
            self.terms.insert(local.clone(), TermDef::Common(regex, *at));
        }
        Ok(())
    }

    fn term_at(&self, name: &str) -> usize {
        match self.terms.get(name) {
            Some(TermDef::Defined(d)) => d.at,
            Some(TermDef::Common(_, at)) => *at,
            None => 0,
        }
    }

    /// The language of terminal `name` (a regular expression, no calls).
    fn terminal(&mut self, name: &str) -> Result<Expr> {
        match self.term_state.get(name) {
            Some(TermState::Done(e)) => return Ok(e.clone()),
            Some(TermState::InProgress) => {
                let at = self.path.iter().position(|p| p == name).unwrap_or(0);
                let mut cycle = self.path[at..].to_vec();
                cycle.push(name.to_string());
                return Err(self.error(
                    self.term_at(name),
                    Some(name),
                    format!(
                        "the terminal is recursive ({}): a terminal is a regular language and cannot use itself; a rule (lowercase name) can",
                        cycle.join(" -> ")
                    ),
                ));
            }
            None => {}
        }
        let expr = match self.terms.get(name) {
            Some(TermDef::Common(regex, _)) => Expr::regex(*regex),
            Some(TermDef::Defined(def)) => {
                let def: &'a Def = def;
                self.term_state.insert(name.to_string(), TermState::InProgress);
                self.path.push(name.to_string());
                let e = self.terminal_alts(&def.body, Some(name));
                self.path.pop();
                e?
            }
            None => return Err(self.undefined(name, 0)),
        };
        self.term_state.insert(name.to_string(), TermState::Done(expr.clone()));
        Ok(expr)
    }

    /// A terminal expression (a terminal's body, or an `%ignore`): regular by construction.
    fn terminal_alts(&mut self, alts: &Alts, owner: Option<&str>) -> Result<Expr> {
        let mut out = Vec::with_capacity(alts.len());
        for seq in alts {
            let mut parts = Vec::with_capacity(seq.len());
            for item in seq {
                let atom = match &item.atom {
                    Atom::Name(n) if self.terms.contains_key(n) => self.terminal(n)?,
                    Atom::Name(n) if self.rules.contains_key(n.as_str()) => {
                        let what = owner.map_or_else(|| "`%ignore`".to_string(), |o| format!("the terminal `{o}`"));
                        return Err(self.error(item.at, owner, format!("{what} uses the rule `{n}`: a terminal may only use terminals and literals")));
                    }
                    Atom::Name(n) => return Err(self.undefined(n, item.at)),
                    Atom::Group(inner) => self.terminal_alts(inner, owner)?,
                    Atom::Maybe(inner) => Expr::optional(self.terminal_alts(inner, owner)?),
                    Atom::Json(_) => return Err(self.error(item.at, owner, "`%json` is a rule, not part of a terminal")),
                    Atom::Token(_) => return Err(self.error(item.at, owner, "a token `<...>` cannot be part of a terminal")),
                    literal => leaf(literal),
                };
                parts.push(repeat(atom, item));
            }
            out.push(Expr::concat(parts));
        }
        Ok(Expr::union(out))
    }

    fn undefined(&self, name: &str, at: usize) -> GrammarError {
        let what = if name.chars().any(|c| c.is_ascii_lowercase()) { "rule" } else { "terminal" };
        self.error(at, Some(name), format!("the {what} is used but never defined"))
    }

    /// A rule's body. A rule whose alternatives begin with the rule itself (direct left
    /// recursion, `a: a x | y`) reads as the others followed by any number of the rests
    /// (`a: y x*`), the same language without the recursion a top-down reader cannot expand.
    fn rule_body(&mut self, def: &Def) -> Result<Expr> {
        let name = def.name.as_str();
        let is_self = |item: &Item| matches!(&item.atom, Atom::Name(n) if n == name) && item.min == 1 && item.max == Some(1);
        let mut bases = Vec::new();
        let mut tails = Vec::new();
        for seq in &def.body {
            match seq.first() {
                Some(first) if is_self(first) => tails.push(self.rule_seq(&seq[1..], name)?),
                _ => bases.push(self.rule_seq(seq, name)?),
            }
        }
        if tails.is_empty() {
            return Ok(Expr::union(bases));
        }
        Ok(Expr::concat(vec![Expr::union(bases), Expr::repeat(Expr::union(tails), 0, None)]))
    }

    fn rule_alts(&mut self, alts: &Alts, rule: &str) -> Result<Expr> {
        let mut out = Vec::with_capacity(alts.len());
        for seq in alts {
            out.push(self.rule_seq(seq, rule)?);
        }
        Ok(Expr::union(out))
    }

    fn rule_seq(&mut self, seq: &[Item], rule: &str) -> Result<Expr> {
        let mut parts = Vec::with_capacity(seq.len());
        for item in seq {
            let atom = match &item.atom {
                Atom::Name(n) => match self.ids.get(n) {
                    Some(&id) => Expr::Call(id),
                    None if self.terms.contains_key(n) => {
                        let t = self.built_terminal(n)?;
                        self.read(t)
                    }
                    None => return Err(self.undefined(n, item.at)),
                },
                Atom::Group(inner) => self.rule_alts(inner, rule)?,
                Atom::Maybe(inner) => Expr::optional(self.rule_alts(inner, rule)?),
                Atom::Json(schema) => {
                    let dfa = json_schema::compile(schema, &JsonSchemaOptions::default(), self.config).map_err(|e| match e {
                        e @ GrammarError::TooLarge { .. } => e,
                        e => self.error(item.at, Some(rule), format!("in `%json`: {e}")),
                    })?;
                    self.read(Expr::Dfa(Rc::new(dfa)))
                }
                Atom::Token(inner) => {
                    let e = token_reference(inner, self.vocab, &mut self.specials).map_err(|r| self.error(item.at, Some(rule), r))?;
                    self.read(e)
                }
                literal => {
                    let e = leaf(literal);
                    self.read(e)
                }
            };
            parts.push(repeat(atom, item));
        }
        Ok(Expr::concat(parts))
    }

    /// A terminal as a rule reads it: any ignored text, then the terminal.
    fn read(&self, terminal: Expr) -> Expr {
        match &self.ignore {
            Some(skip) => Expr::concat(vec![skip.clone(), terminal]),
            None => terminal,
        }
    }

    fn built_terminal(&mut self, name: &str) -> Result<Expr> {
        if let Some(e) = self.built.get(name) {
            return Ok(e.clone());
        }
        let e = self.terminal(name)?.built(self.config)?;
        self.built.insert(name.to_string(), e.clone());
        Ok(e)
    }
}

/// The language of a literal, a regex or a range (the atoms that stand for themselves; the
/// others are lowered by the caller).
fn leaf(atom: &Atom) -> Expr {
    match atom {
        Atom::Literal { text, insensitive: false } => Expr::literal(text),
        Atom::Literal { text, insensitive: true } => Expr::regex(format!("(?i:{})", regex_syntax::escape(text))),
        Atom::Regex(pattern) => Expr::regex(pattern.clone()),
        Atom::Range(lo, hi) => Expr::regex(format!("[\\x{{{:X}}}-\\x{{{:X}}}]", *lo as u32, *hi as u32)),
        _ => Expr::Empty,
    }
}

fn repeat(atom: Expr, item: &Item) -> Expr {
    Expr::repeat(atom, item.min, item.max)
}
