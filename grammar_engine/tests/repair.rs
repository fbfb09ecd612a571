//! Validation and repair through the public face: offsets of the first impossible byte,
//! optimal repairs under plain edit costs, and `max_cost`. The intent model, the search's
//! schedules and the brute-force reference are tested beside the search (`src/repair/`).

use grammar_engine::{repair, validate, CostModel, Dfa, DfaConfig, Edit, EditKind, RepairOptions, RepairResult, RepairStatus, Validation};

fn dfa(p: &str) -> Dfa {
    Dfa::from_regex(p, &DfaConfig::default()).unwrap()
}

/// Applies edits to the original text, independently of the crate's own helper.
fn apply_edits(text: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = 0usize; // next original byte not yet copied or consumed
    let mut last_offset = 0usize;
    for e in edits {
        assert!(e.offset >= last_offset, "edits out of order: {edits:?}");
        last_offset = e.offset;
        assert!(e.offset >= next, "edit at {} overlaps a consumed byte", e.offset);
        out.extend_from_slice(&text[next..e.offset]);
        next = e.offset;
        match e.kind {
            EditKind::Insert => {
                assert!(e.old.is_none());
                out.push(e.new.unwrap());
            }
            EditKind::Delete => {
                assert_eq!(e.old, Some(text[e.offset]));
                assert!(e.new.is_none());
                next += 1;
            }
            EditKind::Substitute => {
                assert_eq!(e.old, Some(text[e.offset]));
                assert_ne!(e.new, e.old);
                out.push(e.new.unwrap());
                next += 1;
            }
        }
    }
    out.extend_from_slice(&text[next..]);
    out
}

/// The cost of one edit under plain edit costs.
fn edit_cost(e: &Edit, opts: &RepairOptions) -> u32 {
    match e.kind {
        EditKind::Insert => opts.insert_cost,
        EditKind::Delete => opts.delete_cost,
        EditKind::Substitute => opts.substitute_cost,
    }
}

/// Checks every invariant of a result that carries a text, under plain edit costs.
fn check(d: &Dfa, text: &[u8], opts: &RepairOptions, r: &RepairResult) -> Vec<u8> {
    let out = r.text.clone().expect("a text");
    assert!(d.accepts(&out), "repaired text does not match: {:?}", String::from_utf8_lossy(&out));
    assert_eq!(apply_edits(text, &r.edits), out);
    assert!(matches!(opts.model, CostModel::Edit), "these tests price plain edits");
    let sum: u32 = r.edits.iter().map(|e| edit_cost(e, opts)).sum();
    assert_eq!(r.cost, Some(sum));
    assert!(r.lower_bound <= sum);
    if r.status == RepairStatus::Optimal {
        assert_eq!(r.lower_bound, sum);
    }
    assert!(std::str::from_utf8(&out).is_ok());
    out
}

#[test]
fn validate_reports_offsets() {
    let d = dfa("[0-9]{3}-[a-z]+");
    assert_eq!(validate(&d, b"123-abc"), Validation { valid: true, error_offset: None });
    assert_eq!(validate(&d, b"12x-abc"), Validation { valid: false, error_offset: Some(2) });
    assert_eq!(validate(&d, b"123-"), Validation { valid: false, error_offset: Some(4) });
    assert_eq!(validate(&d, b""), Validation { valid: false, error_offset: Some(0) });
    assert_eq!(validate(&d, b"123-ab\xff"), Validation { valid: false, error_offset: Some(6) });
}

#[test]
fn valid_text_is_unchanged() {
    let d = dfa("[0-9]{3}-[a-z]+");
    let opts = RepairOptions::default();
    let r = repair(&d, b"123-abc", &opts);
    assert_eq!(r.status, RepairStatus::Optimal);
    assert_eq!(r.text.as_deref(), Some(&b"123-abc"[..]));
    assert_eq!(r.cost, Some(0));
    assert_eq!(r.lower_bound, 0);
    assert!(r.edits.is_empty());
}

#[test]
fn simple_repairs() {
    let d = dfa("[0-9]{3}-[a-z]+");
    let opts = RepairOptions::default();
    for (text, cost) in
        [(&b"12-abc"[..], 1), (b"123abc", 1), (b"1234-abc", 1), (b"123-", 1), (b"", 5), (b"x23-ab", 1)]
    {
        let r = repair(&d, text, &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        assert_eq!(r.cost, Some(cost), "{:?}", String::from_utf8_lossy(text));
        check(&d, text, &opts, &r);
    }
    let r = repair(&d, b"123abc", &opts);
    assert_eq!(r.edits, vec![Edit { kind: EditKind::Insert, offset: 3, old: None, new: Some(b'-') }]);
    let r = repair(&d, b"12x-abc", &opts);
    assert_eq!(r.edits.len(), 1);
    assert_eq!(r.edits[0].kind, EditKind::Substitute);
    assert_eq!(r.edits[0].offset, 2);
}

#[test]
fn max_cost() {
    let d = dfa("[0-9]{3}-[a-z]+");
    let text = b"1x3+abc"; // needs 2 substitutions
    let tight = RepairOptions { max_cost: Some(1), ..RepairOptions::default() };
    let r = repair(&d, text, &tight);
    assert_eq!(r.status, RepairStatus::NoRepairWithinMaxCost);
    assert_eq!(r.text, None);
    assert_eq!(r.cost, None);
    assert!(r.edits.is_empty());
    assert_eq!(r.lower_bound, 2);
    let exact = RepairOptions { max_cost: Some(2), ..RepairOptions::default() };
    let r = repair(&d, text, &exact);
    assert_eq!(r.status, RepairStatus::Optimal);
    assert_eq!(r.cost, Some(2));
    check(&d, text, &exact, &r);
    let zero = RepairOptions { max_cost: Some(0), ..RepairOptions::default() };
    assert_eq!(repair(&d, text, &zero).status, RepairStatus::NoRepairWithinMaxCost);
    assert_eq!(repair(&d, b"123-abc", &zero).status, RepairStatus::Optimal);
}
