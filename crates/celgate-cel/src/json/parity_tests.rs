//! The byte-level parser against the serde_json-driven one: for generated JSON, mutated JSON
//! and garbage, both accept the same texts and build the same tables; a projected parse
//! accepts and refuses what the full parse does, and reads the same wherever it built.

use proptest::prelude::*;
use serde_json::json;

use super::scan::{self, Mode};
use super::{Build, Doc, Item, Ref};
use crate::projection::{Projection, Projections};

/// The byte-level parse alone (no fallback to serde_json).
fn fast<'s>(bytes: &'s [u8], mode: Mode<'_>) -> Option<Doc<'s>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut b = Build::new(text);
    scan::parse(&mut b, mode).ok().map(|()| b.finish())
}

fn same_as_serde(bytes: &[u8]) -> Result<(), TestCaseError> {
    let serde = Doc::parse_serde(bytes);
    let quick = fast(bytes, Mode::Full);
    match (&quick, &serde) {
        (Some(q), Ok(s)) => {
            prop_assert_eq!(q.layout(), s.layout());
            prop_assert_eq!(q.root().to_value(), s.root().to_value());
        }
        (None, Err(_)) => {}
        (q, s) => prop_assert!(
            false,
            "byte-level accepts: {}, serde_json: {:?} for {:?}",
            q.is_some(),
            s.as_ref().map(|_| ()),
            String::from_utf8_lossy(bytes)
        ),
    }
    // Through the public entry: the same result, the same error text.
    match (Doc::parse(bytes), serde) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a.layout(), b.layout()),
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
        _ => prop_assert!(false, "Doc::parse and parse_serde disagree"),
    }
    Ok(())
}

const KEYS: &[&str] = &[
    "a", "b", "metadata", "name", "spec", "k\\u00e9", "ké", "x/y",
];
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "-0.0",
    "1E5",
    "1e-5",
    "2.5e+3",
    "1e400",
    "-1e400",
    "1e-400",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "123456789012345678901234567890",
    "0.1000000000000000055511151231257827021181583404541015625",
    "2.2250738585072011e-308",
    "179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "1797693134862315700000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
    "01",
    "-",
    "1.",
    ".5",
    "1e",
    "+1",
    "-01",
];
const STRINGS: &[&str] = &[
    r#""""#,
    r#""plain""#,
    r#""é日本""#,
    r#""a\"b\\c\/d\b\f\n\r\t""#,
    r#""\u0041\u00e9\u65e5""#,
    r#""\ud83d\ude00""#,
    r#""\ud83d""#,
    r#""\ude00""#,
    r#""\ud83dx""#,
    r#""\ud83d\u0041""#,
    r#""\u00""#,
    r#""\x""#,
    "\"tab\there\"",
    "\"nul\u{0}\"",
    r#""\u0000""#,
];
const PATHS: &[&[&str]] = &[&[], &["a"], &["a", "b"], &["metadata"]];
const WS: &[&str] = &["", " ", "\n", "\t", "\r\n  ", "\u{a0}", "\u{b}"];

fn text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(NUMBERS).prop_map(str::to_string),
        prop::sample::select(STRINGS).prop_map(str::to_string),
        prop::sample::select(&["null", "true", "false", "nul", "tru"][..]).prop_map(str::to_string),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        (any::<u32>(), any::<u32>(), -330i32..330).prop_map(|(a, b, e)| format!("{a}.{b}e{e}")),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        let ws = || prop::sample::select(WS);
        prop_oneof![
            (prop::collection::vec((inner.clone(), ws()), 0..8), ws()).prop_map(|(xs, w)| {
                let items: Vec<String> =
                    xs.into_iter().map(|(x, w)| format!("{w}{x}{w}")).collect();
                format!("[{w}{}]", items.join(","))
            }),
            (
                prop::collection::vec((prop::sample::select(KEYS), inner, ws()), 0..8),
                ws()
            )
                .prop_map(|(xs, w)| {
                    let items: Vec<String> = xs
                        .into_iter()
                        .map(|(k, x, w)| format!("{w}\"{k}\"{w}:{w}{x}"))
                        .collect();
                    format!("{{{w}{}}}", items.join(","))
                }),
        ]
    })
}

/// Byte edits: insert, replace or delete at a position (taken modulo the length).
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    const BYTES: &[u8] = b"{}[],:\"\\u0123456789abcdefDE.-+eE ntrufals\x00\x1f\xff\xc3\xa9";
    (
        text(),
        prop::collection::vec((0u8..3, any::<usize>(), prop::sample::select(BYTES)), 0..4),
    )
        .prop_map(|(t, edits)| {
            let mut b = t.into_bytes();
            for (op, at, byte) in edits {
                let at = at % (b.len() + 1);
                match op {
                    0 => b.insert(at, byte),
                    1 if at < b.len() => b[at] = byte,
                    _ if at < b.len() => {
                        b.remove(at);
                    }
                    _ => {}
                }
            }
            b
        })
}

fn projection() -> impl Strategy<Value = Projection> {
    let leaf = prop_oneof![Just(Projection::none()), Just(Projection::whole())];
    leaf.prop_recursive(4, 32, 4, |inner| {
        (
            prop::collection::vec(
                (
                    prop::sample::select(&["a", "b", "metadata", "ké"][..]),
                    inner.clone(),
                ),
                0..4,
            ),
            prop::option::of(inner),
        )
            .prop_map(|(fields, each)| {
                let mut p = Projection::none();
                for (k, f) in fields {
                    p.field_mut(k).union(&f);
                }
                if let Some(e) = each {
                    p.each_mut().union(&e);
                }
                p
            })
    })
}

/// Compares a projected document's node with the full document's, wherever it built one;
/// a skipped container must be one of the full document (same kind, same value).
fn same_where_built(
    p: Ref<'_, '_>,
    f: Ref<'_, '_>,
    skipped: &mut usize,
) -> Result<(), TestCaseError> {
    match (p.item(), f.item()) {
        (Item::Skipped { object }, full) => {
            *skipped += 1;
            prop_assert!(matches!(
                (object, full),
                (true, Item::Object(_)) | (false, Item::Array(_))
            ));
            prop_assert_eq!(p.to_value(), f.to_value());
            prop_assert!(p.children().next().is_none() && p.get("a").is_none());
        }
        (Item::Object(n), Item::Object(m)) => {
            prop_assert_eq!(n, m);
            let (mut a, mut b) = (p.children(), f.children());
            while let (Some((ka, va)), Some((kb, vb))) = (a.next_entry(), b.next_entry()) {
                prop_assert_eq!(ka, kb);
                prop_assert_eq!(p.get(ka).map(|r| r.index()), Some(va.index()));
                same_where_built(va, vb, skipped)?;
            }
        }
        (Item::Array(n), Item::Array(m)) => {
            prop_assert_eq!(n, m);
            for (i, (a, b)) in p.children().zip(f.children()).enumerate() {
                prop_assert_eq!(p.element(i).map(|r| r.index()), Some(a.index()));
                same_where_built(a, b, skipped)?;
            }
        }
        _ => prop_assert_eq!(p.to_value(), f.to_value()),
    }
    Ok(())
}

fn projected_same_as_full(
    bytes: &[u8],
    at: &[&str],
    proj: &Projection,
) -> Result<usize, TestCaseError> {
    let mut routes = Projections::new();
    routes.project(at, proj);
    let full = Doc::parse(bytes);
    let projected = Doc::parse_projected(bytes, &routes);
    // The byte-level projected parse alone accepts exactly what the full parse accepts.
    prop_assert_eq!(fast(bytes, Mode::route(&routes)).is_some(), full.is_ok());
    let mut skipped = 0;
    match (projected, full) {
        (Ok(p), Ok(f)) => same_where_built(p.root(), f.root(), &mut skipped)?,
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
        (a, b) => prop_assert!(
            false,
            "projected {:?} vs full {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    }
    Ok(skipped)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn generated_json_parses_as_serde_json_parses_it(t in text()) {
        same_as_serde(t.as_bytes())?;
    }

    #[test]
    fn mutated_json_parses_as_serde_json_parses_it(b in mutated()) {
        same_as_serde(&b)?;
    }

    #[test]
    fn string_runs_end_at_the_first_quote_backslash_or_control_byte(
        b in prop::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), Just(0x1f), Just(0x20), 0x20u8..0xff, any::<u8>()], 0..40),
        from in 0usize..40,
    ) {
        let from = from.min(b.len());
        let naive = b[from..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .map_or(b.len(), |p| from + p);
        let wide = b[from..naive].iter().any(|&c| c >= 0x80);
        prop_assert_eq!(scan::special(&b, from), (naive, wide));
    }

    #[test]
    fn garbage_parses_as_serde_json_parses_it(b in prop::collection::vec(any::<u8>(), 0..24)) {
        same_as_serde(&b)?;
    }

    #[test]
    fn projected_parses_accept_what_full_parses_do_and_read_the_same(
        t in text(),
        edits in prop::collection::vec((any::<usize>(), prop::sample::select(&b"{}[],:\"\\1e-"[..])), 0..2),
        p in projection(),
        at in prop::sample::select(PATHS),
    ) {
        let mut b = t.into_bytes();
        for (i, byte) in edits {
            let i = i % (b.len() + 1);
            b.insert(i, byte);
        }
        projected_same_as_full(&b, at, &p)?;
    }
}

#[test]
fn number_edges_read_as_serde_json_reads_them() {
    for n in NUMBERS {
        same_as_serde(n.as_bytes()).unwrap();
        same_as_serde(format!("[{n}]").as_bytes()).unwrap();
    }
    let doc = Doc::parse(b"[-0, 9223372036854775808, -9223372036854775808, 1E5, 1.0]").unwrap();
    let items: Vec<String> = doc
        .root()
        .children()
        .map(|r| match r.item() {
            Item::Int(i) => format!("int {i}"),
            Item::Double(d) => format!("double {d:?}"),
            _ => "other".into(),
        })
        .collect();
    assert_eq!(
        items,
        [
            "double -0.0",
            "double 9.223372036854776e18",
            "int -9223372036854775808",
            "double 100000.0",
            "double 1.0"
        ]
    );
}

#[test]
fn deep_nesting_is_parsed_on_any_thread_without_overflow() {
    let deep = format!(
        "{}{}",
        "[".repeat(super::MAX_DEPTH),
        "]".repeat(super::MAX_DEPTH)
    );
    let too_deep = format!("[{deep}]");
    // A small thread stack: the parse grows onto the heap.
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            assert!(fast(deep.as_bytes(), Mode::Full).is_some());
            assert!(fast(too_deep.as_bytes(), Mode::Full).is_none());
            let e = Doc::parse(too_deep.as_bytes()).unwrap_err().to_string();
            assert!(e.starts_with("JSON nested deeper than 10002 levels"), "{e}");
            // Skipped, the same depth is checked.
            let mut routes = Projections::new();
            routes.project(&[], &Projection::none());
            assert!(matches!(
                Doc::parse_projected(deep.as_bytes(), &routes)
                    .unwrap()
                    .root()
                    .item(),
                Item::Skipped { object: false }
            ));
            let e = Doc::parse_projected(too_deep.as_bytes(), &routes).unwrap_err();
            assert!(e.to_string().starts_with("JSON nested deeper"), "{e}");
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn projections_skip_what_nobody_reads_and_keep_its_key() {
    let review = json!({
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "object": {"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"containers": [{"image": "i", "env": [{"name": "x"}]}]}, "status": {"phase": "Running"}},
            "oldObject": {"metadata": {"name": "old"}, "spec": {"x": [1]}},
        }
    });
    let text = serde_json::to_vec(&review).unwrap();
    let mut object = Projection::none();
    object.field_mut("metadata").field_mut("name").set_whole();
    object
        .field_mut("spec")
        .field_mut("containers")
        .each_mut()
        .field_mut("image")
        .set_whole();
    let mut routes = Projections::new();
    routes.project(&["request", "object"], &object);
    routes.project(&["request", "oldObject"], &Projection::none());
    let doc = Doc::parse_projected(&text, &routes).unwrap();
    let request = doc.root().get("request").unwrap();
    assert!(matches!(request.get("uid").unwrap().item(), Item::Str("u")));
    let o = request.get("object").unwrap();
    let metadata = o.get("metadata").unwrap();
    assert!(matches!(
        metadata.get("name").unwrap().item(),
        Item::Str("n")
    ));
    assert!(matches!(
        metadata.get("labels").unwrap().item(),
        Item::Skipped { object: true }
    ));
    let container = o
        .get("spec")
        .unwrap()
        .get("containers")
        .unwrap()
        .element(0)
        .unwrap();
    assert!(matches!(
        container.get("image").unwrap().item(),
        Item::Str("i")
    ));
    let env = container.get("env").unwrap();
    assert!(env.is_skipped() && env.children().next().is_none());
    assert_eq!(env.skipped_text(), Some(r#"[{"name":"x"}]"#));
    assert_eq!(env.to_value(), json!([{"name": "x"}]));
    assert!(o.get("status").unwrap().is_skipped());
    let old = request.get("oldObject").unwrap();
    assert!(matches!(old.item(), Item::Skipped { object: true }));
    assert_eq!(doc.root().to_value(), review);
    // Evaluation cannot read a skipped container as anything: value.rs's tests.
    // A repeated key inside a skipped object is refused as the full parse refuses it.
    let dup = r#"{"request": {"oldObject": {"a": {"k\u00e9": 1, "ké": 2}}}}"#.as_bytes();
    assert_eq!(
        Doc::parse_projected(dup, &routes).unwrap_err().to_string(),
        Doc::parse(dup).unwrap_err().to_string()
    );
    for bad in [
        &br#"{"request": {"oldObject": {"a": [1e400]}}}"#[..],
        br#"{"request": {"oldObject": {"a": "\ud800"}}}"#,
        br#"{"request": {"oldObject": {"a": [01]}}}"#,
        br#"{"request": {"oldObject": {"a": [1,]}}}"#,
    ] {
        assert_eq!(
            Doc::parse_projected(bad, &routes).unwrap_err().to_string(),
            Doc::parse(bad).unwrap_err().to_string()
        );
    }
}

#[test]
fn nested_paths_merge_into_the_outer_projection() {
    let mut inner = Projection::none();
    inner.field_mut("x").set_whole();
    let mut routes = Projections::new();
    routes.project(&["a", "b"], &inner);
    routes.project(&["a"], &Projection::none());
    routes.project(&["a", "c"], &Projection::whole());
    let here = routes.below("a").and_then(Projections::here).unwrap();
    assert!(here.field("b").and_then(|b| b.field("x")).is_some());
    assert!(here.field("c").is_some_and(Projection::is_whole));
    assert!(here.field("d").is_none());
}

/// The whole document skipped (a projection that reads nothing of it).
fn skipped_all(bytes: &[u8]) -> Option<Doc<'_>> {
    let mut routes = Projections::new();
    routes.project(&[], &Projection::none());
    fast(bytes, Mode::route(&routes))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn a_skipped_document_is_refused_where_serde_json_refuses_it(b in mutated()) {
        let container = matches!(b.iter().find(|c| !c.is_ascii_whitespace()), Some(b'{' | b'['));
        prop_assume!(container);
        prop_assert_eq!(skipped_all(&b).is_some(), Doc::parse_serde(&b).is_ok());
    }
}

#[test]
fn skipped_containers_refuse_what_the_full_parse_refuses() {
    let many: Vec<String> = (0..40).map(|i| format!("\"key-{i}\":{i}")).collect();
    let many = many.join(",");
    let refused = [
        // Repeated keys: escaped, past the 8-byte prefix, in a large object, nested.
        r#"{"k\u00e9":1,"ké":2}"#.to_string(),
        r#"{"a\/b":1,"a/b":2}"#.to_string(),
        r#"{"longer-key-1":1,"x":[],"longer-key-1":{}}"#.to_string(),
        format!("{{{many},\"key-7\":0}}"),
        format!("{{\"a\":[{{{many},\"key-39\":null}}]}}"),
        // Bad numbers.
        "[01]".into(),
        "[-]".into(),
        "[1.]".into(),
        "[1e]".into(),
        "[.5]".into(),
        "[1e400]".into(),
        "[-1e400]".into(),
        format!("[1{}]", "0".repeat(400)),
        // Bad escapes and strings, in keys and values.
        r#"{"\x":1}"#.into(),
        r#"{"\ud800":1}"#.into(),
        r#"{"\udc00x":1}"#.into(),
        r#"["\u00"]"#.into(),
        r#"["\ud83d\u0041"]"#.into(),
        "[\"tab\there\"]".into(),
        // Grammar.
        "[1,]".into(),
        r#"{"a":1,}"#.into(),
        r#"{"a" 1}"#.into(),
        r#"{1:1}"#.into(),
        "[tru]".into(),
        "[nulll]".into(),
        "[1 2]".into(),
        "[[]".into(),
        "{}}".into(),
    ];
    for text in &refused {
        for doc in [
            text.clone(),
            format!(r#"{{"x":{text}}}"#),
            format!("[0,{text}]"),
        ] {
            assert!(
                Doc::parse_serde(doc.as_bytes()).is_err(),
                "serde accepts {doc}"
            );
            assert!(skipped_all(doc.as_bytes()).is_none(), "skip accepts {doc}");
        }
    }
    let accepted = [
        r#"{"k\u00e9":1,"kè":2,"k":{"k":[]}}"#.to_string(),
        r#"{"longer-key-1":1,"longer-key-2":2}"#.into(),
        format!("{{{many}}}"),
        format!("[1{}]", "0".repeat(300)),
        r#"[-0, 0.5e-3, 1E+2, 18446744073709551616, "\ud83d\ude00\"\\\/\b\f\n\r\t", true, false, null]"#.into(),
        " [ { } , [ ] ] ".into(),
    ];
    for text in &accepted {
        assert!(
            Doc::parse_serde(text.as_bytes()).is_ok(),
            "serde refuses {text}"
        );
        assert!(
            skipped_all(text.as_bytes()).is_some(),
            "skip refuses {text}"
        );
    }
    // Depth: the limit counts the skipped levels as the full parse does.
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(skipped_all(deep(super::MAX_DEPTH).as_bytes()).is_some());
    assert!(skipped_all(deep(super::MAX_DEPTH + 1).as_bytes()).is_none());
    let inside = format!(r#"{{"a":{}}}"#, deep(super::MAX_DEPTH));
    assert!(Doc::parse_serde(inside.as_bytes()).is_err());
    assert!(skipped_all(inside.as_bytes()).is_none());
}
