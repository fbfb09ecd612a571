//! `format`: the strings each known format name allows, as anchored patterns over decoded
//! strings (compiled like `pattern`, so encoding is handled in one place).
//!
//! The judge is Python's `jsonschema` with format checking on, and the official test suite is
//! the specification's word; each language here is accepted by both, exactly where they agree
//! and can be expressed, as a documented subset where not. Which checker `jsonschema` uses
//! for a name can depend on optional packages (`rfc3987` or `rfc3986-validator` for URIs,
//! `rfc3987-syntax` for IRIs, `fqdn`, `idna`, `rfc3339-validator`, `isoduration`,
//! `jsonpointer`, `uri-template`, `webcolors`); each language is accepted by every one of them.
//!
//! Exact (the checkers' languages, ASCII digits where they take Unicode ones):
//! `date` (real calendar dates, years 0001–9999), `ipv4` (no leading zeros), `ipv6` (every
//! compressed form, embedded IPv4, no zone), `uuid` (8-4-4-4-12 hex), `json-pointer`.
//!
//! Sound subsets:
//! - `date-time`, `time`: RFC 3339 with `T`/`t`, `Z`/`z`, offsets up to 23:59 and fractional
//!   seconds, without leap seconds (`rfc3339-validator` rejects second 60).
//! - `email`: dot-atom or quoted local part, `@`, dot-separated hostname labels or an IPv4 /
//!   IPv6 address literal (the checker only asks for an `@`; the test suite asks for
//!   RFC 5321). Under a `maxLength` of [`EMAIL_LONGEST`] or more and a `minLength` of at most
//!   3 (which every address meets), the local part has at most RFC 5321's 64 characters and
//!   the labels are limited as `hostname`'s are, so no address is longer than the bound and
//!   neither length needs counting; elsewhere neither part is limited (the limits make the
//!   automaton larger, and a length counted over it would not fit).
//!   `idn-email`: the same with letters, marks and digits of any script, never limited.
//! - `hostname`, `idn-hostname`: ASCII labels of 1–63 letters, digits and inner hyphens,
//!   never `--` in the third and fourth place (so no `xn--` labels, whose Punycode `idna`
//!   would check), an optional trailing dot. The 253-character limit is kept without a
//!   length-counting automaton (24,000 states) by limiting the labels: up to three of up to 63
//!   characters, four with the last up to 60, or five to eight of up to 30 (so at most 253
//!   characters even with the trailing dot). Non-ASCII names
//!   (exact IDNA 2008) are not generated.
//! - `uri`, `uri-reference`: the RFC 3986 grammar (which `rfc3987` and `rfc3986-validator`
//!   implement). `iri`, `iri-reference`: the RFC 3987 grammar as far as `rfc3987-syntax` follows
//!   it too: non-ASCII characters from the Basic Multilingual Plane only, IPv6 literals with all
//!   eight groups or a `::` standing for exactly one.
//! - `uri-template`: RFC 6570 expressions (ASCII variable names, prefixes of 1–3 digits) between
//!   RFC 6570 ASCII literals.
//! - `duration`: the RFC 3339 appendix A grammar (`P1Y2M3DT4H5M6S`, `P2W`), which
//!   `isoduration` accepts.
//! - `relative-json-pointer`: an ASCII prefix the checker accepts (`0`, or digits 1–9
//!   optionally followed by one `0`: its leading-zero test rejects any `0` followed by a digit),
//!   then `#` or a JSON pointer.
//! - `regex`: a regular subset of the patterns both ECMA-262 and Python's `re` compile: literal
//!   characters, `.`, class escapes, escaped metacharacters, simple classes, groups one level
//!   deep, `* + ?` (lazy too) and `{n}` / `{n,}`, `^` and `$` at the ends, alternation.
//! - `color` (draft 3; `jsonschema.FormatChecker()` still checks it): `#rgb` / `#rrggbb`.
//!
//! Every other name is an annotation: no constraint.

use std::cell::RefCell;
use std::collections::HashMap;

use super::context::{Ctx, Dialect};
use super::pattern;
use super::search;
use crate::automata::Expr;
use crate::automata::DfaConfig;
use crate::error::{GrammarError, Result};

/// The format names that constrain strings (the names `format_pattern` knows; any other name
/// is an annotation). Listed for the tests that check each one.
#[cfg(test)]
pub(crate) const KNOWN_FORMATS: &[&str] = &[
    "color",
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "idn-email",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
];

const DATE: &str = concat!(
    r"(?:(?:\d{3}[1-9]|\d{2}[1-9]0|\d[1-9]00|[1-9]000)-",
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)",
    r"|(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)"
);

const TIME: &str = r"(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)";

const DEC_OCTET: &str = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)";

const HEX: &str = "[0-9A-Fa-f]";

/// An ASCII hostname label: letters, digits, inner hyphens, 1–`max` long, not `--` in places
/// three and four.
fn label(max: u32) -> String {
    let a = "[A-Za-z0-9]";
    let h = "[A-Za-z0-9-]";
    format!("{a}(?:{a}|{h}{a}|{h}{h}{a}|{h}(?:{a}{h}|{h}{a}){h}{{0,{}}}{a})?", max - 5)
}

fn ipv4() -> String {
    format!(r"{DEC_OCTET}(?:\.{DEC_OCTET}){{3}}")
}

/// RFC 3986 `IPv6address` (which is also what Python's `ipaddress` accepts).
fn ipv6() -> String {
    let h16 = format!("{HEX}{{1,4}}");
    let ls32 = format!("(?:{h16}:{h16}|{})", ipv4());
    let head = |n: u32| -> String {
        match n {
            0 => String::new(),
            1 => format!("(?:{h16})?"),
            n => format!("(?:(?:{h16}:){{0,{}}}{h16})?", n - 1),
        }
    };
    let alts = [
        format!("(?:{h16}:){{6}}{ls32}"),
        format!("::(?:{h16}:){{5}}{ls32}"),
        format!("{}::(?:{h16}:){{4}}{ls32}", head(1)),
        format!("{}::(?:{h16}:){{3}}{ls32}", head(2)),
        format!("{}::(?:{h16}:){{2}}{ls32}", head(3)),
        format!("{}::{h16}:{ls32}", head(4)),
        format!("{}::{ls32}", head(5)),
        format!("{}::{h16}", head(6)),
        format!("{}::", head(7)),
    ];
    format!("(?:{})", alts.join("|"))
}

/// The IPv6 literals `rfc3987-syntax` accepts in IRIs: all eight groups, or seven with `::`
/// standing for the eighth (a subset of RFC 3986's forms).
fn ipv6_one_gap() -> String {
    let h16 = format!("{HEX}{{1,4}}");
    let ls32 = format!("(?:{h16}:{h16}|{})", ipv4());
    let groups = |n: usize| (0..n).map(|_| format!("{h16}:")).collect::<String>();
    let mut alts = vec![format!("{}{ls32}", groups(6)), format!("::{}{ls32}", groups(5))];
    for before in 1..=5 {
        // `before` groups, "::", then groups up to seven in all (ls32 counts two).
        let head: Vec<String> = (0..before).map(|_| h16.clone()).collect();
        alts.push(format!("{}::{}{ls32}", head.join(":"), groups(5 - before)));
    }
    let head6: Vec<String> = (0..6).map(|_| h16.clone()).collect();
    alts.push(format!("{}::{h16}", head6.join(":")));
    let head7: Vec<String> = (0..7).map(|_| h16.clone()).collect();
    alts.push(format!("{}::", head7.join(":")));
    format!("(?:{})", alts.join("|"))
}

/// The URI and IRI grammars of RFC 3986 / RFC 3987, for one character class of "unreserved"
/// and one IPv6 literal grammar.
struct Rfc3986 {
    unreserved: String,
    ipv6: String,
}

impl Rfc3986 {
    fn pct() -> String {
        format!("%{HEX}{{2}}")
    }

    fn pchar(&self) -> String {
        format!("(?:{}|[!$&'()*+,;=:@]|{})", self.unreserved, Self::pct())
    }

    fn authority(&self) -> String {
        let sub = "[!$&'()*+,;=]";
        let pct = Self::pct();
        let u = &self.unreserved;
        let userinfo = format!("(?:{u}|{pct}|{sub}|:)*");
        let ip_future = format!(r"v{HEX}+\.(?:[A-Za-z0-9._~-]|{sub}|:)+");
        let reg_name = format!("(?:{u}|{pct}|{sub})*");
        format!(r"(?:{userinfo}@)?(?:\[(?:{}|{ip_future})\]|{reg_name})(?::\d*)?", self.ipv6)
    }

    fn hier(&self, relative: bool) -> String {
        let p = self.pchar();
        let first = if relative {
            format!("(?:{}|{}|[!$&'()*+,;=@])+", self.unreserved, Self::pct())
        } else {
            format!("{p}+")
        };
        format!("(?://{}(?:/{p}*)*|/(?:{p}+(?:/{p}*)*)?|{first}(?:/{p}*)*|)", self.authority())
    }

    fn absolute(&self, query_extra: &str) -> String {
        let p = self.pchar();
        format!(r"[A-Za-z][A-Za-z0-9+.-]*:{}(?:\?(?:{p}|{query_extra}[/?])*)?(?:#(?:{p}|[/?])*)?", self.hier(false))
    }

    fn relative(&self, query_extra: &str) -> String {
        let p = self.pchar();
        format!(r"{}(?:\?(?:{p}|{query_extra}[/?])*)?(?:#(?:{p}|[/?])*)?", self.hier(true))
    }
}

/// RFC 3987 `ucschar`, its Basic Multilingual Plane part (`rfc3987-syntax` has no other).
const UCSCHAR: &str = r"\u{A0}-\u{D7FF}\u{F900}-\u{FDCF}\u{FDF0}-\u{FFEF}";

/// RFC 3987 `iprivate`, its Basic Multilingual Plane part.
const IPRIVATE: &str = r"[\u{E000}-\u{F8FF}]";

fn uri_like(name: &str) -> String {
    let iri = name.starts_with("iri");
    let grammar = Rfc3986 {
        unreserved: if iri { format!("[A-Za-z0-9._~{UCSCHAR}-]") } else { "[A-Za-z0-9._~-]".to_string() },
        ipv6: if iri { ipv6_one_gap() } else { ipv6() },
    };
    let extra = if iri { format!("{IPRIVATE}|") } else { String::new() };
    let absolute = grammar.absolute(&extra);
    if name.ends_with("-reference") {
        format!("(?:{absolute}|{})", grammar.relative(&extra))
    } else {
        absolute
    }
}

/// The longest `email` address when its parts are limited (see the module docs): a local part
/// of 64 characters, `@`, and 252 characters of labels.
pub(crate) const EMAIL_LONGEST: u64 = 317;

/// The shortest `email` address (`a@b`).
const EMAIL_SHORTEST: u64 = 3;

/// `email` with its parts limited, anchored: the local part (everything before the last `@`,
/// which no domain holds) at most 64 characters, as a lookahead right after `^` (an
/// intersection, see [`search`]), and the labels `hostname` allows.
fn limited_email() -> String {
    let atext = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    format!("^(?=.{{1,64}}@[^@]+$)(?:{})$", email_with(atext, &host_labels()))
}

fn email(international: bool) -> String {
    let one = if international {
        r"[A-Za-z0-9\p{L}\p{M}\p{N}](?:[A-Za-z0-9\p{L}\p{M}\p{N}-]*[A-Za-z0-9\p{L}\p{M}\p{N}])?".to_string()
    } else {
        label(63)
    };
    let atext = if international { r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\p{L}\p{M}\p{N}-]" } else { r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]" };
    email_with(atext, &format!(r"{one}(?:\.{one})*"))
}

/// A local part of `atext` characters (or quoted), `@`, and `domain` or an address literal.
fn email_with(atext: &str, domain: &str) -> String {
    let quoted = r#""(?:[ !\x23-\x5B\x5D-\x7E]|\\[ -\x7E])*""#;
    format!(
        r"(?:{atext}+(?:\.{atext}+)*|{quoted})@(?:{domain}|\[{}\]|\[IPv6:{}\])",
        ipv4(),
        ipv6()
    )
}

fn hostname() -> String {
    format!(r"{}\.?", host_labels())
}

/// A hostname without the trailing dot: at most 252 characters (see the module docs).
fn host_labels() -> String {
    let (l63, l60, l30) = (label(63), label(60), label(30));
    format!(r"(?:(?:{l63}\.){{0,2}}{l63}|(?:{l63}\.){{3}}{l60}|(?:{l30}\.){{4,7}}{l30})")
}

fn duration() -> String {
    let d = r"\d+";
    let second = format!("{d}S");
    let minute = format!("{d}M(?:{second})?");
    let hour = format!("{d}H(?:{minute})?");
    let time = format!("T(?:{hour}|{minute}|{second})");
    let day = format!("{d}D");
    let month = format!("{d}M(?:{day})?");
    let year = format!("{d}Y(?:{month})?");
    format!("P(?:(?:{day}|{month}|{year})(?:{time})?|{time}|{d}W)")
}

const JSON_POINTER: &str = "(?:/(?:[^/~]|~[01])*)*";

fn uri_template() -> String {
    let literal = format!(r"(?:[!#$&()*+,./0-9:;=?@A-Z\[\]_a-z~-]|%{HEX}{{2}})");
    let varname = r"[A-Za-z0-9_](?:\.?[A-Za-z0-9_])*";
    let varspec = format!(r"{varname}(?::[1-9]\d{{0,2}}|\*)?");
    format!(r"(?:{literal}|\{{[+#./;?&]?{varspec}(?:,{varspec})*\}})*")
}

/// A regular subset of the regexes both ECMA-262 (with `u`) and Python's `re` compile.
fn regex() -> String {
    let literal = r"[^\\^$.|?*+()\[\]{}]";
    let escape = r"\\[dDwWsS\\^$.|?*+()\[\]{}/]";
    let item = r"(?:[^\\\]\[^-]|0-9|a-z|A-Z|\\[dDwWsS\\\]\[^-])";
    let class = format!(r"\[\^?{item}+\]");
    let quantifier = r"(?:(?:[*+?]|\{\d{1,3},?\})\??)";
    let flat_atom = format!(r"(?:{literal}|\.|{escape}|{class})");
    let flat_branch = format!("(?:{flat_atom}{quantifier}?)*");
    let group = format!(r"\((?:\?:)?{flat_branch}(?:\|{flat_branch})*\)");
    let branch = format!("(?:(?:{flat_atom}|{group}){quantifier}?)*");
    format!(r"\^?{branch}(?:\|{branch})*\$?")
}

/// The anchored pattern (decoded level) of a known format.
fn format_pattern(name: &str) -> Option<String> {
    let body = match name {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        "date-time" => format!("{DATE}[Tt]{TIME}"),
        "email" => email(false),
        "idn-email" => email(true),
        "hostname" | "idn-hostname" => hostname(),
        "ipv4" => ipv4(),
        "ipv6" => ipv6(),
        "uri" | "uri-reference" | "iri" | "iri-reference" => uri_like(name),
        "uri-template" => uri_template(),
        "uuid" => format!("{HEX}{{8}}(?:-{HEX}{{4}}){{3}}-{HEX}{{12}}"),
        "duration" => duration(),
        "json-pointer" => JSON_POINTER.to_string(),
        "relative-json-pointer" => format!("(?:0|[1-9]+0?)(?:#|{JSON_POINTER})"),
        "regex" => regex(),
        "color" => format!("#(?:{HEX}{{3}}){{1,2}}"),
        _ => return None,
    };
    Some(format!("^(?:{body})$"))
}

/// An anchored pattern holding every string format `name` allows under each reading from
/// `oldest` on, for over-languages; `None` where that is any string: the format is not
/// checked under some reading (each draft's checker knows fewer names), its checker needs an
/// optional package (without it the name is not checked), or its language here is a subset
/// of the checker's.
///
/// `ipv4`, `ipv6` and `date` are exact (their checkers, from the standard library, take ASCII
/// digits only).
/// `uuid`'s checker takes more than the 8-4-4-4-12 hex form: with the hyphens at those places
/// and no other, the remaining 32 characters go to `int(_, 16)`, which also reads other
/// scripts' digits, `_` between digits, a `+` and surrounding spaces; so its over-pattern is
/// the hyphens' places alone.
pub(crate) fn over_pattern(name: &str, oldest: Dialect) -> Option<String> {
    let (since, pattern) = match name {
        "ipv4" | "ipv6" => (Dialect::Draft4, format_pattern(name)),
        "date" => (Dialect::Draft7, format_pattern(name)),
        "uuid" => (Dialect::Draft2019, Some("^[^-]{8}-[^-]{4}-[^-]{4}-[^-]{4}-[^-]{12}$".to_string())),
        _ => return None,
    };
    pattern.filter(|_| oldest >= since)
}

thread_local! {
    static CACHE: RefCell<HashMap<(String, bool), Expr>> = RefCell::new(HashMap::new());
}

/// The canonical texts (no quotes) of the strings of format `name` under a `minLength` of
/// `min_length` and a `maxLength` of `max_length`; `None` for a name that is an annotation only.
pub(crate) fn format_expr(name: &str, min_length: u64, max_length: Option<u64>, ctx: &Ctx, config: &DfaConfig) -> Result<Option<Expr>> {
    // The limits free a bound only when neither length needs counting.
    let limited = name == "email" && min_length <= EMAIL_SHORTEST && max_length.is_some_and(|m| m >= EMAIL_LONGEST);
    let key = (name.to_string(), limited);
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(Some(hit));
    }
    let text = if limited { Some(limited_email()) } else { format_pattern(name) };
    let Some(text) = text else { return Ok(None) };
    let node = pattern::parse(&text).map_err(|e| GrammarError::InvalidRegex {
        pattern: text.clone(),
        offset: 0,
        reason: format!("internal pattern of format {name:?}: {e}"),
    })?;
    let expr = search::search_language(&node, ctx, config)?;
    CACHE.with(|c| c.borrow_mut().insert(key, expr.clone()));
    Ok(Some(expr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(name: &str) -> impl Fn(&str) -> bool {
        let e = format_expr(name, 0, None, &Ctx::root(), &DfaConfig::default()).unwrap().unwrap();
        let d = e.to_dfa(&DfaConfig::default()).unwrap().unwrap();
        move |s: &str| {
            let t = d.walk(d.start(), super::super::canonical::spell(s).as_bytes());
            !t.is_dead() && d.is_accepting(t)
        }
    }

    fn check(name: &str, yes: &[&str], no: &[&str]) {
        let f = accepts(name);
        for s in yes {
            assert!(f(s), "{name} should accept {s:?}");
        }
        for s in no {
            assert!(!f(s), "{name} should reject {s:?}");
        }
    }

    #[test]
    fn every_known_format_compiles_and_unknown_ones_do_not_constrain() {
        for name in KNOWN_FORMATS {
            assert!(format_expr(name, 0, None, &Ctx::root(), &DfaConfig::default()).unwrap().is_some(), "{name}");
        }
        assert!(format_expr("unknown", 0, None, &Ctx::root(), &DfaConfig::default()).unwrap().is_none());
        assert!(format_expr("int32", 0, None, &Ctx::root(), &DfaConfig::default()).unwrap().is_none());
    }

    #[test]
    fn dates_and_times() {
        check("date", &["2020-02-29", "0001-01-01", "2000-02-29", "1963-06-19"], &["2021-02-29", "1900-02-29", "0000-01-01", "2020-13-01", "2020-04-31", "2020-1-01"]);
        check("time", &["08:30:06Z", "23:59:59.999+23:59", "00:00:00z", "12:00:00-08:00"], &["23:59:60Z", "24:00:00Z", "12:00:00", "12:00:00+24:00", "8:30:06Z"]);
        check("date-time", &["1963-06-19T08:30:06.283185Z", "1963-06-19t08:30:06z"], &["1963-06-19 08:30:06Z", "1998-12-31T23:59:60Z", "1963-06-19T08:30:06"]);
        check("duration", &["P4DT12H30M5S", "P4Y", "PT0S", "P1M", "PT36H", "P2W", "P1Y2M"], &["PT1D", "P", "P1YT", "PT", "P2D1Y", "P1D2H", "P1Y2W", "P1"]);
    }

    #[test]
    fn addresses() {
        check("ipv4", &["192.168.0.1", "0.0.0.0", "255.255.255.255"], &["087.10.0.1", "256.1.1.1", "1.2.3", "1.2.3.4.5"]);
        check(
            "ipv6",
            &["::", "::1", "1::", "1:2:3:4:5:6:7:8", "1::2:3:4:5:6:7", "1:2:3:4:5:6:7::", "::ffff:192.168.0.1", "1:2:3:4:5:6:1.2.3.4", "ABCD::ef"],
            &["1:2:3:4:5:6:7", "1::2::3", ":1::", "1:2:3:4:5:6:7:8:9", "12345::", "1:2:3:4:5:6:7:1.2.3.4", "::1%eth0", "::01.2.3.4"],
        );
        check("uuid", &["2eb8aa08-AA98-11ea-B4Aa-73B441D16380"], &["2eb8aa08aa9811eab4aa73b441d16380", "2eb8aa08-aa98-11ea-b4ga-73b441d16380"]);
        let long = format!("{}.com", "a".repeat(63));
        check("hostname", &["www.example.com", "a", "1host", "host-name", "example.com.", &long, &"a".repeat(63), "a.b.c.d.e.f.g.h"], &["-a", "a-", "a_b", "", ".", "xn--abc", "ab--c", &format!("{}.com", "a".repeat(64)), "a.b.c.d.e.f.g.h.i"]);
        check("email", &["joe.bloggs@example.com", "\"joe bloggs\"@example.com", "a@[127.0.0.1]", "a@[IPv6:::1]", "te~st@x"], &["2962", ".a@b", "a.@b", "a..b@c", "a@b=c", "a@[127.0.0.300]"]);
        check("idn-email", &["실례@실례.테스트", "a@b"], &["2962"]);
    }

    #[test]
    fn references() {
        check("uri", &["http://foo.bar/?baz=qux#quux", "mailto:a@b", "urn:x:y", "ldap://[2001:db8::7]/c=GB?o", "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com"], &["//foo.bar/", "/abc", "abc", "http:// x", "bar,baz:foo", "http://ƒ.com"]);
        check("uri-reference", &["/abc", "abc", "#frag", "", "//host"], &["\\\\x", "#a\\b", "a:b c"]);
        check("iri", &["http://ƒøø.ßår/?∂éœ=πîx#πîüx", "http://[1:2:3:4:5:6:7:8]", "http://[1::3:4:5:6:7:8]"], &["http://[2001:db8::1]", "http://\u{10000}","http://2001:0db8:85a3:0000:0000:8a2e:0370:7334", "âππ", "/abc"]);
        check("iri-reference", &["âππ", "#ƒrägmênt", "//ƒøø.ßår/"], &["#ƒräg\\mênt"]);
        check("json-pointer", &["", "/", "/a~1b", "/k\"l", "/i\\j", "/ ", "/\n"], &["#", "/~", "/~2", "a"]);
        check("relative-json-pointer", &["0", "1", "10", "120", "0#", "0/foo", "2/0/baz"], &["", "/a", "-1/a", "01/a", "100", "0##"]);
        check("uri-template", &["http://example.com/dictionary/{term:1}/{term}", "{+path}/x{?a,b*}", "x"], &["{term", "a}b", "{}", "{x:0}", "{x:1000}"]);
    }

    #[test]
    fn regex_subset() {
        check("regex", &["([abc])+\\s+$", "^a.b*$", "[^0-9]\\d{2,}", "a|b|", "(?:x)?", "", "\\.\\/"], &["^(abc]", "\\a", "a{,2}", "(", "[]", "*a", "a**", "[\\w-.]", "(?=a)"]);
        check("color", &["#fff", "#A0b1C2"], &["#ff", "red", "#ffff"]);
    }
}
