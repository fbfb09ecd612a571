use crate::repair::test_support::*;
use crate::repair::{repair, repair_impl, CostModel, EditKind, IntentWeights, RepairOptions, RepairStatus};

#[test]
fn costs_steer_the_repair() {
    let d = dfa("ab");
    // Substitution cheaper than delete + insert.
    let r = repair(&d, b"xb", &RepairOptions::default());
    assert_eq!(r.cost, Some(1));
    assert_eq!(r.edits[0].kind, EditKind::Substitute);
    // Substitution dearer than delete + insert.
    let opts = RepairOptions { substitute_cost: 5, ..RepairOptions::default() };
    let r = repair(&d, b"xb", &opts);
    assert_eq!(r.cost, Some(2));
    check(&d, b"xb", &opts, &r);
    assert!(r.edits.iter().all(|e| e.kind != EditKind::Substitute));
    // Expensive deletions: keep the bytes by inserting around them when the language allows.
    let d = dfa("a[a-z]*b");
    let opts = RepairOptions { delete_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
    let r = repair(&d, b"xyz", &opts);
    assert_eq!(r.cost, Some(2));
    assert_eq!(check(&d, b"xyz", &opts, &r), b"axyzb");
}

#[test]
fn json_trailing_comma() {
    let d = json_object_dfa();
    let (r, out) = repair_json(&d, r#"{"name": "Ada", "tags": ["x", "y",], "age": 36,}"#);
    assert_eq!(r.cost, Some(2));
    assert_eq!(out, r#"{"name": "Ada", "tags": ["x", "y"], "age": 36}"#);
    assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete && e.old == Some(b',')));
}

#[test]
fn json_missing_brace_and_quote() {
    let d = json_object_dfa();
    let (r, out) = repair_json(&d, r#"{"name": "Ada", "age": 36"#);
    assert_eq!(r.cost, Some(1));
    assert_eq!(out, r#"{"name": "Ada", "age": 36}"#);
    let (r, out) = repair_json(&d, r#"{"name": "Ada}"#);
    assert_eq!(r.cost, Some(1));
    assert_eq!(out, r#"{"name": "Ada"}"#);
    let (r, out) = repair_json(&d, r#"{"name": "Ada"#);
    assert_eq!(r.cost, Some(2));
    assert_eq!(out, r#"{"name": "Ada"}"#);
    let (r, _) = repair_json(&d, r#"{"name": Ada", "ok": true}"#);
    assert_eq!(r.cost, Some(1));
}

#[test]
fn json_surrounding_prose() {
    // Minimal edit distance may absorb prose into a string rather than delete it; the
    // reference search confirms each cost is optimal.
    let d = json_object_dfa();
    for text in [
        r#"Note: {"a": 1}"#,
        "{\"a\": [1, 2]}\nHope it helps!",
        "Sure:\n{\"a\": true} ok",
        "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.",
    ] {
        let (r, _) = repair_json(&d, text);
        assert!(r.cost.unwrap() > 0);
    }
    // Making insertions and substitutions dearer than deletions strips the prose instead.
    let opts = RepairOptions { insert_cost: 10, substitute_cost: 10, ..RepairOptions::default() };
    let text = "Here you go!\n\n{\"name\": \"Ada\", \"age\": 36}\n\nLet me know.";
    let r = repair(&d, text.as_bytes(), &opts);
    assert_eq!(r.cost, Some(reference_cost(&d, text.as_bytes(), &opts)));
    let out = String::from_utf8(check(&d, text.as_bytes(), &opts, &r)).unwrap();
    assert_eq!(out.trim(), r#"{"name": "Ada", "age": 36}"#);
    assert!(r.edits.iter().all(|e| e.kind == EditKind::Delete));
    let (r, out) = repair_json(&d, r#"ok {"a": 1}"#);
    assert_eq!(r.cost, Some(2));
    assert_eq!(out, r#" {"a": 1}"#);
    let (r, out) = repair_json(&d, "{\"a\": 1} ok");
    assert_eq!(r.cost, Some(2));
    assert_eq!(out, "{\"a\": 1} ");
}

/// The intent model's optimum equals a brute-force search priced by an independent
/// implementation of the model, on random corruptions of JSON and under random weights.
#[test]
fn intent_model_matches_reference() {
    let d = json_object_dfa();
    let bases = [
        r#"{"name": "Ada", "age": 36, "tags": ['x', "y"]}"#,
        r#"Sure: {"a":1,"b":[true,false,null],"c":"it's"} ok"#,
        r#"```json\n{'k': -1.5e3, "l": [ ]}\n```"#,
    ];
    let junk = b"{}[]\",:' x1\\\nT";
    let mut rng = Rng(0x5eed);
    for round in 0..40 {
        let mut text = bases[rng.below(bases.len() as u64) as usize].as_bytes().to_vec();
        for _ in 0..rng.below(4) {
            let at = rng.below(text.len() as u64 + 1) as usize;
            let byte = junk[rng.below(junk.len() as u64) as usize];
            match rng.below(3) {
                0 if at < text.len() => {
                    text.remove(at);
                }
                1 if at < text.len() => text[at] = byte,
                _ => text.insert(at, byte),
            }
        }
        let mut w = IntentWeights::DEFAULT;
        if round % 2 == 1 {
            for v in [
                &mut w.delete_before,
                &mut w.delete_after,
                &mut w.delete_structure,
                &mut w.delete_space,
                &mut w.delete_string,
                &mut w.insert_punct,
                &mut w.insert_quote,
                &mut w.insert_escape,
                &mut w.insert_other,
                &mut w.substitute,
                &mut w.substitute_string,
                &mut w.substitute_quote,
                &mut w.substitute_near,
                &mut w.keep_quote,
                &mut w.keep_outside,
            ] {
                *v = 1 + rng.below(12) as u32;
            }
        }
        let opts = RepairOptions { model: CostModel::Intent(w), ..RepairOptions::default() };
        let want = reference_cost(&d, &text, &opts);
        let r = repair(&d, &text, &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        assert_eq!(r.cost, Some(want), "{:?} {w:?}", String::from_utf8_lossy(&text));
        check(&d, &text, &opts, &r);
        for tuning in tunings(text.len()) {
            let other = repair_impl(&d, &text, &opts, tuning);
            assert_eq!(other.cost, Some(want), "{:?} {tuning:?}", String::from_utf8_lossy(&text));
            check(&d, &text, &opts, &other);
        }
    }
}

/// What the intent model is for: prose and fences deleted, quotes swapped, a truncated
/// value closed, a Python literal rewritten.
#[test]
fn intent_model_reads_like_a_person() {
    let d = json_object_dfa();
    let opts = intent();
    for (text, want) in [
        ("Sure! Here is the JSON: {\"a\": 1}", r#"{"a": 1}"#),
        ("```json\n{\"a\": [1, 2]}\n```", r#"{"a": [1, 2]}"#),
        ("{\"a\": true}\nLet me know if you need anything else!", r#"{"a": true}"#),
        ("{'name': 'Ada', 'tags': ['x', 'y']}", r#"{"name": "Ada", "tags": ["x", "y"]}"#),
        (r#"{"name": "Ada", "ok": True}"#, r#"{"name": "Ada", "ok": true}"#),
        (
            r#"{"name": "Ada", "tags": ["x"], "note": "a long no"#,
            r#"{"name": "Ada", "tags": ["x"], "note": "a long no"}"#,
        ),
    ] {
        let r = repair(&d, text.as_bytes(), &opts);
        assert_eq!(r.status, RepairStatus::Optimal);
        let out = check(&d, text.as_bytes(), &opts, &r);
        assert_eq!(String::from_utf8(out).unwrap().trim(), want, "{text:?}");
    }
}
