use super::test_support::*;
use super::*;

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

#[test]
fn broken_utf8_gives_valid_utf8() {
    let d = dfa("[é日]+");
    let opts = RepairOptions::default();
    let inputs: [&[u8]; 6] =
        [b"\xc3\xa9\xc3\xe6\x97\xa5", b"\xe6\x97", b"\xff\xfe", b"", b"\xc3\xa9x\xe6\x97\xa5\xa5", b"\xa9\xc3"];
    for text in inputs {
        let r = repair(&d, text, &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        let out = check(&d, text, &opts, &r);
        let s = std::str::from_utf8(&out).expect("valid UTF-8");
        assert!(!s.is_empty() && s.chars().all(|c| c == 'é' || c == '日'));
        assert_eq!(r.cost, Some(reference_cost(&d, text, &opts)));
        for tuning in tunings(text.len()) {
            let other = repair_impl(&d, text, &opts, tuning);
            assert_eq!(other.cost, r.cost);
            assert!(std::str::from_utf8(&check(&d, text, &opts, &other)).is_ok());
        }
    }
    // One missing continuation byte costs one insertion.
    let r = repair(&d, b"\xc3\xa9\xe6\x97", &opts);
    assert_eq!(r.cost, Some(1));
    assert_eq!(r.text.as_deref(), Some("é日".as_bytes()));
}

#[test]
fn invalid_utf8_against_ascii_grammar() {
    let d = dfa("[a-z]+(,[a-z]+)*");
    let opts = RepairOptions::default();
    let text = b"ab\xff\xfecd,,e\x80";
    let r = repair(&d, text, &opts);
    assert_eq!(r.cost, Some(reference_cost(&d, text, &opts)));
    assert_eq!(r.cost, Some(4));
    check(&d, text, &opts, &r);
}
