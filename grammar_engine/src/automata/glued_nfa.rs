//! An NFA made of whole DFAs glued together by empty moves, and its determinization.
//!
//! The automaton algebra ([`crate::automata::algebra`]) compiles every regex leaf to a [`Dfa`] first, so
//! the automaton of a grammar expression is a set of DFA copies wired by concatenation, union
//! and repetition. Here a copy keeps its DFA's own transition table: a state of a copy is one
//! NFA node, its moves on a byte are one table lookup, and an accepting state also moves
//! (without input) to the copy's exit. The glue is union nodes with any number of empty moves.
//!
//! The subset construction ([`crate::automata::subset`]) then moves each copy state of a set by one
//! lookup in its DFA's table, where a Thompson NFA would hold the state as byte ranges to
//! search.

use std::rc::Rc;
use std::sync::Arc;

use crate::automata::{Dfa, DfaConfig};
use crate::error::{GrammarError, Result};
use crate::util::int_hash::IntMap;
use crate::util::StateId;
use crate::automata::subset::{self, Automaton, NodeId, Visit};

/// A DFA held by a copy: a leaf of the expression or a shared regex DFA.
#[derive(Clone)]
pub(crate) enum SharedDfa {
    Rc(Rc<Dfa>),
    Arc(Arc<Dfa>),
}

impl SharedDfa {
    fn get(&self) -> &Dfa {
        match self {
            SharedDfa::Rc(d) => d,
            SharedDfa::Arc(d) => d,
        }
    }

    fn key(&self) -> usize {
        self.get() as *const Dfa as usize
    }
}

/// One node of the NFA.
enum Node {
    /// State `state` of copy `copy`.
    State { copy: u32, state: StateId },
    /// Empty moves to each target (none: matches nothing).
    Union(Vec<NodeId>),
    /// The end of the whole automaton.
    Match,
}

/// One copy of a DFA in the NFA.
struct Embedded {
    /// Index into the distinct DFAs.
    dfa: u32,
    /// The node of the DFA's state 0; its state `s` is node `base + s`.
    base: NodeId,
    /// The union node an accepting state moves to.
    exit: NodeId,
}

/// An NFA of DFA copies and union nodes, built fragment by fragment.
pub(crate) struct GluedNfa {
    nodes: Vec<Node>,
    copies: Vec<Embedded>,
    /// The distinct DFAs, and where each is in this list by address.
    dfas: Vec<SharedDfa>,
    dfa_index: IntMap<usize, u32>,
    /// Most nodes allowed (from the config's build size limit).
    max_nodes: usize,
}

impl GluedNfa {
    pub(crate) fn new(config: &DfaConfig) -> GluedNfa {
        GluedNfa {
            nodes: Vec::new(),
            copies: Vec::new(),
            dfas: Vec::new(),
            dfa_index: IntMap::default(),
            max_nodes: (config.build_size_limit / std::mem::size_of::<Node>().max(1)).min(u32::MAX as usize - 1),
        }
    }

    fn push(&mut self, node: Node) -> Result<NodeId> {
        if self.nodes.len() >= self.max_nodes {
            return Err(GrammarError::TooLarge {
                what: "automaton of a grammar expression",
                limit: self.max_nodes,
                detail: format!("more than {} nodes", self.max_nodes),
            });
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as NodeId)
    }

    /// A new union node with no moves yet (add them with [`GluedNfa::patch`]).
    pub(crate) fn add_union(&mut self) -> Result<NodeId> {
        self.push(Node::Union(Vec::new()))
    }

    /// The match node.
    pub(crate) fn add_match(&mut self) -> Result<NodeId> {
        self.push(Node::Match)
    }

    /// Adds an empty move from union node `from` to `to`.
    pub(crate) fn patch(&mut self, from: NodeId, to: NodeId) {
        match &mut self.nodes[from as usize] {
            Node::Union(targets) => targets.push(to),
            _ => unreachable!("only union nodes are patched"),
        }
    }

    /// Copies `dfa` in; returns its entry (the start state's node) and its exit (a union node
    /// every accepting state moves to).
    pub(crate) fn embed(&mut self, dfa: SharedDfa) -> Result<(NodeId, NodeId)> {
        let exit = self.add_union()?;
        let key = dfa.key();
        let index = match self.dfa_index.get(&key) {
            Some(&i) => i,
            None => {
                self.dfas.push(dfa);
                let i = (self.dfas.len() - 1) as u32;
                self.dfa_index.insert(key, i);
                i
            }
        };
        let d = self.dfas[index as usize].get();
        let n = d.num_states();
        let copy = self.copies.len() as u32;
        let base = self.nodes.len() as NodeId;
        for state in 0..n {
            self.push(Node::State { copy, state: StateId::from_index(state) })?;
        }
        self.copies.push(Embedded {
            dfa: index,
            base,
            exit,
        });
        Ok((base, exit))
    }

    /// Determinizes the automaton from `start` (full-match semantics), then prunes and
    /// minimizes it ([`subset::determinize`]).
    pub(crate) fn determinize(&self, start: NodeId, config: &DfaConfig) -> Result<Dfa> {
        config.check_nfa_states(self.thompson_states(), false)?;
        let (classes, reps) = self.byte_classes();
        let view = GluedView {
            nfa: self,
            local: self
                .dfas
                .iter()
                .map(|d| reps.iter().map(|&b| d.get().class(b) as u8).collect())
                .collect(),
            reads: self
                .dfas
                .iter()
                .map(|d| {
                    let d = d.get();
                    (0..d.num_states())
                        .map(|s| d.row(StateId::from_index(s)).iter().any(|&t| !t.is_dead()))
                        .collect()
                })
                .collect(),
        };
        subset::determinize(&view, start, classes, &reps, config)
    }

    /// The states a Thompson NFA of the same automaton has once its empty states are removed
    /// (the unit of [`DfaConfig::check_nfa_states`]): a sparse state per DFA state, a union
    /// per accepting one (to the exit) and per union node here that chooses between moves.
    fn thompson_states(&self) -> u64 {
        let unions = self
            .nodes
            .iter()
            .filter(|n| matches!(n, Node::Union(t) if t.len() > 1))
            .count();
        // Per distinct DFA, then once per copy of it.
        let per_dfa: Vec<usize> = self
            .dfas
            .iter()
            .map(|d| {
                let d = d.get();
                d.num_states() + (0..d.num_states()).filter(|&s| d.is_accepting(StateId::from_index(s))).count()
            })
            .collect();
        let states: usize = self.copies.iter().map(|c| per_dfa[c.dfa as usize]).sum();
        (states + unions + 1) as u64
    }

    /// The coarsest byte classes under which every distinct DFA moves all bytes of a class
    /// alike, and one byte of each class. A DFA's own classes may split bytes it treats the
    /// same (its classes come from the regex, before minimization), so its classes with equal
    /// columns of targets count as one; more classes than needed would cost a move per class
    /// per state, and could make the table too large to minimize.
    fn byte_classes(&self) -> ([u8; 256], Vec<u8>) {
        let mut classes = [0u8; 256];
        for d in &self.dfas {
            let d = d.get();
            let stride = d.row(d.start()).len();
            let mut columns: IntMap<Vec<StateId>, u8> = IntMap::default();
            let column_of: Vec<u8> = (0..stride)
                .map(|c| {
                    let column: Vec<StateId> =
                        (0..d.num_states()).map(|s| d.row(StateId::from_index(s))[c]).collect();
                    let n = columns.len() as u8;
                    *columns.entry(column).or_insert(n)
                })
                .collect();
            let mut renumber: IntMap<(u8, u8), u8> = IntMap::default();
            for b in 0..=255u8 {
                let key = (classes[b as usize], column_of[d.class(b)]);
                let n = renumber.len() as u8;
                classes[b as usize] = *renumber.entry(key).or_insert(n);
            }
        }
        (classes, subset::representatives(&classes))
    }
}

/// A [`GluedNfa`] with what its subset construction looks up per move: per distinct DFA, its
/// class of each byte class's representative, and which of its states read some byte (an
/// accepting state that reads nothing is only a way to the exit, not a kernel member).
struct GluedView<'a> {
    nfa: &'a GluedNfa,
    local: Vec<Vec<u8>>,
    reads: Vec<Vec<bool>>,
}

impl Automaton for GluedView<'_> {
    fn num_nodes(&self) -> usize {
        self.nfa.nodes.len()
    }

    fn expand(&self, node: NodeId, mut push: impl FnMut(NodeId)) -> Visit {
        match &self.nfa.nodes[node as usize] {
            Node::State { copy, state } => {
                let c = &self.nfa.copies[*copy as usize];
                if self.nfa.dfas[c.dfa as usize].get().is_accepting(*state) {
                    push(c.exit);
                }
                if self.reads[c.dfa as usize][state.as_usize()] {
                    Visit::Reads
                } else {
                    Visit::Passes
                }
            }
            Node::Union(targets) => {
                targets.iter().for_each(|&t| push(t));
                Visit::Passes
            }
            Node::Match => Visit::Matches,
        }
    }

    #[inline]
    fn step(&self, node: NodeId, class: usize, _byte: u8) -> Option<NodeId> {
        let Node::State { copy, state } = self.nfa.nodes[node as usize] else {
            return None;
        };
        let c = &self.nfa.copies[copy as usize];
        let t = self.nfa.dfas[c.dfa as usize].get().row(state)
            [self.local[c.dfa as usize][class] as usize];
        (!t.is_dead()).then_some(c.base + t.as_u32())
    }
}
