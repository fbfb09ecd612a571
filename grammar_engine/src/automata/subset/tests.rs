use std::collections::{HashSet, VecDeque};
use std::rc::Rc;

use crate::automata::Expr;
use crate::automata::{Dfa, DfaConfig};
use crate::util::StateId;
use crate::repair::test_support::Rng;

/// Whether two DFAs accept the same strings: walked side by side over every byte, each
/// pair of states reached must agree on acceptance and on dying (both keep live states
/// only, so a dead side and a live side differ).
fn same_language(a: &Dfa, b: &Dfa) -> bool {
    let mut seen = HashSet::from([(a.start(), b.start())]);
    let mut queue = VecDeque::from([(a.start(), b.start())]);
    while let Some((s, t)) = queue.pop_front() {
        if a.is_accepting(s) != b.is_accepting(t) {
            return false;
        }
        for byte in 0..=255u8 {
            let pair = (a.next(s, byte), b.next(t, byte));
            match pair {
                (StateId::DEAD, StateId::DEAD) => {}
                (StateId::DEAD, _) | (_, StateId::DEAD) => return false,
                _ if seen.insert(pair) => queue.push_back(pair),
                _ => {}
            }
        }
    }
    true
}

const LEAVES: [&str; 12] = [
    "a",
    "b",
    "[a-c]",
    "[^a]",
    "é",
    "[0-9]{1,3}",
    "x*",
    "(ab|a)",
    ".",
    "[α-ω]+",
    "\"[^\"\\\\]{0,4}\"",
    "",
];

/// A random regex over [`LEAVES`]: concatenations, alternations and counted repeats.
fn random_regex(rng: &mut Rng, depth: usize) -> String {
    if depth == 0 || rng.below(3) == 0 {
        return LEAVES[rng.below(LEAVES.len() as u64) as usize].to_string();
    }
    let (x, y) = (random_regex(rng, depth - 1), random_regex(rng, depth - 1));
    match rng.below(4) {
        0 => format!("(?:{x})(?:{y})"),
        1 => format!("(?:{x}|{y})"),
        2 => format!("(?:{x}){{{},{}}}", rng.below(2), 1 + rng.below(3)),
        _ => format!("(?:{x})*(?:{y})?"),
    }
}

/// The same language as a regex, with its leaves built into DFA leaves (so that
/// [`Expr::to_dfa`] glues DFAs instead of rendering one regex).
fn random_expr(rng: &mut Rng, depth: usize, cfg: &DfaConfig) -> (Expr, String) {
    if depth == 0 || rng.below(3) == 0 {
        let leaf = LEAVES[rng.below(LEAVES.len() as u64) as usize];
        let dfa = Dfa::from_regex(leaf, cfg).unwrap();
        return (Expr::Dfa(Rc::new(dfa)), format!("(?:{leaf})"));
    }
    let ((a, x), (b, y)) = (
        random_expr(rng, depth - 1, cfg),
        random_expr(rng, depth - 1, cfg),
    );
    match rng.below(4) {
        0 => (Expr::concat(vec![a, b]), format!("(?:{x}{y})")),
        1 => (Expr::union(vec![a, b]), format!("(?:{x}|{y})")),
        2 => {
            let (min, max) = (rng.below(2) as u32, 1 + rng.below(3) as u32);
            (
                Expr::repeat(a, min, Some(max)),
                format!("(?:(?:{x}){{{min},{max}}})"),
            )
        }
        _ => (
            Expr::concat(vec![Expr::repeat(a, 0, None), Expr::optional(b)]),
            format!("(?:{x}*{y}?)"),
        ),
    }
}

#[test]
fn thompson_subsets_agree_with_the_lazy_dfa() {
    let cfg = DfaConfig::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let fixed = [
        "[a-z]{2,5}q",
        "\\w+@\\w+",
        "(?s:.){0,3}x",
        "[^\\x00-\\x7f]+",
        "(a|ab)(c|bcd)(d*)",
        "",
    ];
    let patterns: Vec<String> = fixed
        .iter()
        .map(|p| p.to_string())
        .chain((0..300).map(|_| random_regex(&mut rng, 4)))
        .collect();
    for p in &patterns {
        let ours = Dfa::from_regex(p, &cfg).unwrap();
        let lazy = Dfa::from_regex_by_lazy_dfa(p, &cfg).unwrap();
        assert!(same_language(&ours, &lazy), "{p}");
        assert_eq!(ours.num_states(), lazy.num_states(), "both minimal: {p}");
    }
}

#[test]
fn glued_dfas_agree_with_the_rendered_regex() {
    let cfg = DfaConfig::default();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..300 {
        let (expr, regex) = random_expr(&mut rng, 4, &cfg);
        let glued = expr.to_dfa(&cfg).unwrap().expect("no leaf is empty");
        let lazy = Dfa::from_regex_by_lazy_dfa(&regex, &cfg).unwrap();
        assert!(same_language(&glued, &lazy), "{regex}");
        assert_eq!(
            glued.num_states(),
            lazy.num_states(),
            "both minimal: {regex}"
        );
    }
}

#[test]
fn limits_and_empty_languages_are_typed_errors() {
    use crate::error::GrammarError;
    let small = DfaConfig {
        max_states: 30,
        ..DfaConfig::default()
    };
    // `.*a.{8}` needs 2^9 states: the construction stops at twice the limit.
    assert!(matches!(
        Dfa::from_regex("(?s:.)*a(?s:.){8}", &small),
        Err(GrammarError::TooLarge { .. })
    ));
    // The sets and the table are held to the heap limit: `[ab]*a[ab]{12}` has a small NFA
    // and 2^13 DFA states.
    let tight = DfaConfig { build_size_limit: 16 << 10, ..DfaConfig::default() };
    let err = Dfa::from_regex("[ab]*a[ab]{12}", &tight).unwrap_err();
    assert!(matches!(err, GrammarError::TooLarge { what: "determinization memory (bytes)", .. }), "{err:?}");
    assert!(Dfa::from_regex("[ab]*a[ab]{12}", &DfaConfig::default()).is_ok());
    let cfg = DfaConfig::default();
    let a = Expr::Dfa(Rc::new(Dfa::from_regex("a", &cfg).unwrap()));
    let never = Expr::concat(vec![a.clone(), Expr::regex("[^\\x00-\\x{10FFFF}]")]);
    assert!(never.to_dfa(&cfg).unwrap().is_none());
    assert!(Expr::union(vec![a.clone(), never])
        .to_dfa(&cfg)
        .unwrap()
        .is_some());
}

/// A small NFA given by its moves: node `n` moves on class `c` to the target paired with `c`
/// in `self.0[n]`; a node without moves only passes.
struct TableNfa(Vec<Vec<(usize, super::NodeId)>>);

impl super::Automaton for TableNfa {
    fn num_nodes(&self) -> usize {
        self.0.len()
    }

    fn expand(&self, node: super::NodeId, _push: impl FnMut(super::NodeId)) -> super::Visit {
        if self.0[node as usize].is_empty() {
            super::Visit::Passes
        } else {
            super::Visit::Reads
        }
    }

    fn step(&self, node: super::NodeId, class: usize, _byte: u8) -> Option<super::NodeId> {
        self.0[node as usize].iter().find(|&&(c, _)| c == class).map(|&(_, t)| t)
    }
}

#[test]
fn a_kernels_moves_are_grouped_by_class_and_each_nodes_found_once() {
    let nfa = TableNfa(vec![vec![(2, 1), (0, 2)], vec![(2, 3)], vec![], vec![(0, 0), (3, 1)]]);
    let reps = [b'a', b'b', b'c', b'd'];
    let mut moves = super::Moves::new(nfa.0.len());
    let mut buckets = super::Buckets::new(reps.len());
    // Three members, each stepped on all four classes once, five moves grouped.
    assert_eq!(buckets.fill(&[0, 1, 3], &mut moves, &nfa, &reps), 3 + 3 * 4 + 5);
    let grouped: Vec<Vec<u32>> = (0..4).map(|c| buckets.of(c).to_vec()).collect();
    assert_eq!(grouped, vec![vec![2, 0], vec![], vec![1, 3], vec![1]]);
    // A member met before is not stepped again, and the buckets start empty.
    assert_eq!(buckets.fill(&[3], &mut moves, &nfa, &reps), 1 + 2);
    let grouped: Vec<Vec<u32>> = (0..4).map(|c| buckets.of(c).to_vec()).collect();
    assert_eq!(grouped, vec![vec![0], vec![], vec![], vec![1]]);
    assert_eq!(moves.pairs.len(), 5);
    assert_eq!(buckets.fill(&[], &mut moves, &nfa, &reps), 0);
    assert!((0..4).all(|c| buckets.of(c).is_empty()));
}
