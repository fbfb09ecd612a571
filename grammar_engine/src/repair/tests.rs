use super::test_support::*;
use super::*;

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
