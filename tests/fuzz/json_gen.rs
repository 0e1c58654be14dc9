//! JSON generators and mutators: generated objects (bound to `object` for the evaluator),
//! irregular JSON text (for `Doc::parse`), structure-aware tree mutations (for reviews and
//! policies), and byte and line mutations.

use serde_json::{Map, Value as Json};

use crate::cel_gen;
use crate::choices::Choices;

pub const KEYS: &[&str] = &[
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "containers",
    "image",
    "replicas",
    "ports",
    "containerPort",
    "securityContext",
    "privileged",
    "resources",
    "limits",
    "cpu",
    "memory",
    "a",
    "b",
    "c",
    "x",
    "items",
    "",
    "in",
    "null",
    "true",
    "__proto__",
    "with-dash",
    "dotted.key",
    "slash/key",
    "ünï",
    "日本",
    "😀",
    "  space",
    "0",
    "1e3",
    "aaaaaaaaa",
    "aaaaaaaab",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "kind",
    "apiVersion",
    "operation",
    "uid",
    "object",
    "oldObject",
    "request",
    "status",
    "data",
    "value",
];

fn string_value(c: &mut Choices) -> String {
    match c.below(6) {
        0..=2 => c
            .pick(&[
                "",
                "a",
                "nginx",
                "kube-system",
                "CREATE",
                "UPDATE",
                "DELETE",
                "CONNECT",
                "true",
                "1",
                "1Gi",
                "500m",
                "10.0.0.1",
                "1.2.3",
                "https://x.io/a?b=c",
                "2023-01-01T00:00:00Z",
                "1h",
                "héllo",
                "日本語",
                "😀",
                "a\u{0}b",
                "line\nbreak",
                "tab\there",
                "quote\"s",
                "back\\slash",
                "\u{feff}",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "Pod",
                "v1",
                "apps",
                "deployments",
                "system:masters",
            ])
            .to_string(),
        3 => (0..c.below(10)).map(|_| cel_gen::random_char(c)).collect(),
        4 => "x".repeat(c.below(4) * 300),
        _ => c.pick(KEYS).to_string(),
    }
}

fn number(c: &mut Choices) -> Json {
    match c.below(8) {
        0..=3 => Json::from(c.below(20) as i64 - 5),
        4 => Json::from(*c.pick(&[i64::MAX, i64::MIN, -1, 1 << 53, (1 << 53) + 1, 65536])),
        5 => Json::from(*c.pick(&[u64::MAX, (i64::MAX as u64) + 1])),
        6 => {
            let x = f64::from_bits(c.u64());
            serde_json::Number::from_f64(if x.is_finite() { x } else { 0.5 })
                .map_or(Json::Null, Json::Number)
        }
        _ => serde_json::Number::from_f64(*c.pick(&[0.5, -0.0, 1.0, 1e300, -2.5, 0.1, 3.0]))
            .map_or(Json::Null, Json::Number),
    }
}

/// A JSON value; containers up to `depth` levels.
pub fn value(c: &mut Choices, depth: usize) -> Json {
    let containers = if depth < 5 { 3 } else { 0 };
    match c.weighted(&[2, 2, 5, 5, containers, containers, 1]) {
        0 => Json::Null,
        1 => Json::Bool(c.chance(1, 2)),
        2 => number(c),
        3 => Json::String(string_value(c)),
        4 => {
            // Long arrays (past the document's element-table threshold) hold scalars only,
            // and only near the root, so that nesting cannot multiply sizes (a long list at
            // every one of hundreds of leaves made objects of 100 MiB).
            if depth <= 2 && c.chance(1, 12) {
                let n = 60 + c.below(20);
                Json::Array((0..n).map(|_| value(c, 99)).collect())
            } else {
                let n = c.below(5);
                Json::Array((0..n).map(|_| value(c, depth + 1)).collect())
            }
        }
        5 => object(c, depth + 1),
        _ => {
            // A list of similar flat objects, as containers are; long only near the root.
            let n = if depth <= 2 && c.chance(1, 6) {
                64 + c.below(10)
            } else {
                c.below(4)
            };
            let proto = object(c, 99);
            Json::Array((0..n).map(|_| proto.clone()).collect())
        }
    }
}

pub fn object(c: &mut Choices, depth: usize) -> Json {
    let n = c.below(6);
    let mut m = Map::new();
    for _ in 0..n {
        let k = if c.chance(1, 8) {
            string_value(c)
        } else {
            c.pick(KEYS).to_string()
        };
        m.insert(k, value(c, depth));
    }
    Json::Object(m)
}

/// The root object for an evaluation: usually shaped like a Kubernetes object.
pub fn root_object(c: &mut Choices) -> Json {
    let mut o = object(c, 1);
    if c.chance(2, 3) {
        if let Json::Object(m) = &mut o {
            let mut meta = Map::new();
            meta.insert("name".into(), Json::String(string_value(c)));
            meta.insert("labels".into(), object(c, 4));
            m.insert("metadata".into(), Json::Object(meta));
            m.insert("spec".into(), object(c, 2));
        }
    }
    o
}

// ---------------------------------------------------------------------------------------
// JSON text for `Doc::parse`.

fn ws(c: &mut Choices, out: &mut String) {
    if c.chance(1, 4) {
        out.push_str(c.pick_str(&[" ", "\n", "\t", "\r\n", "  "]));
    } else if c.chance(1, 64) {
        out.push_str(c.pick_str(&["\u{a0}", "\u{feff}", "\x0b", "\x0c"]));
    }
}

fn text_string(c: &mut Choices, out: &mut String) {
    out.push('"');
    for _ in 0..c.below(6) {
        match c.below(10) {
            0..=4 => out.push_str(
                &string_value(c)
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
                    .replace('\t', "\\t")
                    .replace('\0', "\\u0000"),
            ),
            5 => out.push_str(c.pick_str(&[
                "\\\"",
                "\\\\",
                "\\/",
                "\\b",
                "\\f",
                "\\n",
                "\\r",
                "\\t",
                "\\u0041",
                "\\u00e9",
                "\\u0000",
                "\\ud83d\\ude00",
                "\\uDBFF\\uDFFF",
                "\\u001f",
                "\\u007f",
                "\\u2028",
            ])),
            6 => {
                let ch = cel_gen::random_char(c);
                if ch >= ' ' && ch != '"' && ch != '\\' {
                    out.push(ch);
                }
            }
            7 if c.chance(1, 8) => out.push_str(c.pick_str(&[
                "\u{1}",
                "\u{1f}",
                "\t",
                "\n",
                "\\ud800",
                "\\udc00",
                "\\u",
                "\\x41",
                "\\'",
                "\\uZZZZ",
                "\\ud800\\u0041",
            ])),
            _ => out.push_str(c.pick_str(KEYS)),
        }
    }
    out.push('"');
}

fn text_number(c: &mut Choices, out: &mut String) {
    if c.chance(1, 12) {
        out.push_str(c.pick_str(&[
            "1e309", "-1e400", "00", "01", "1.", ".5", "+1", "1e", "NaN", "Infinity", "0x10",
            "2.5e", "-", "1e+", "--1", "1_000",
        ]));
        return;
    }
    out.push_str(c.pick_str(&[
        "0",
        "1",
        "-1",
        "-0",
        "1.0",
        "1.5",
        "-0.0",
        "1e3",
        "1E+3",
        "1e-3",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "1e308",
        "4.9e-324",
        "1e-400",
        "0.1",
        "1.7976931348623157e308",
        "12",
        "100000",
        "-0e0",
        "0.30000000000000004",
        "2.5E-3",
        "1e-7",
        "123456789.123456789",
        "5e-324",
    ]));
}

/// JSON-like text: mostly valid, with irregular numbers, escapes, whitespace, duplicate keys,
/// deep nesting and long arrays.
pub fn json_text(c: &mut Choices, depth: usize, out: &mut String) {
    ws(c, out);
    let containers = if depth < 12 { 4 } else { 0 };
    match c.weighted(&[1, 1, 3, 3, containers, containers, 1, 1]) {
        0 if c.chance(1, 16) => out.push_str(c.pick_str(&["nul", "True", "undefined", "'a'"])),
        0 => out.push_str("null"),
        1 => out.push_str(c.pick_str(&["true", "false"])),
        2 => text_number(c, out),
        3 => text_string(c, out),
        4 => {
            out.push('[');
            let n = if c.chance(1, 10) {
                60 + c.below(20)
            } else {
                c.below(4)
            };
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                json_text(c, depth + 1, out);
            }
            if c.chance(1, 20) {
                out.push(',');
            }
            out.push(']');
        }
        5 => {
            out.push('{');
            let n = c.below(5);
            let mut keys: Vec<String> = Vec::new();
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                ws(c, out);
                let start = out.len();
                if !keys.is_empty() && c.chance(1, 5) {
                    // A duplicate key.
                    let k = keys[c.below(keys.len())].clone();
                    out.push_str(&k);
                } else {
                    text_string(c, out);
                }
                keys.push(out[start..].to_string());
                ws(c, out);
                out.push(':');
                json_text(c, depth + 1, out);
            }
            out.push('}');
        }
        6 => {
            // Deep nesting around serde_json's recursion limit (128).
            let n = 100 + c.below(60);
            let (open, close) = *c.pick(&[("[", "]"), ("{\"a\":", "}"), ("[{\"k\":", "}]")]);
            out.push_str(&open.repeat(n));
            out.push('1');
            out.push_str(&close.repeat(n));
        }
        _ => {
            // A document-shaped object: long arrays of objects with shared key prefixes.
            out.push_str("{\"items\":[");
            let n = 60 + c.below(20);
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!(
                    "{{\"aaaaaaaaa{}\":{},\"name\":\"n{i}\"}}",
                    i % 3,
                    i
                ));
            }
            out.push_str("]}");
        }
    }
    ws(c, out);
}

/// Byte-level mutations: flips, insertions, deletions, splices, invalid UTF-8.
pub fn mutate_bytes(c: &mut Choices, data: &mut Vec<u8>, tokens: &[&str]) {
    let n = if c.chance(1, 3) { 1 + c.below(3) } else { 0 };
    for _ in 0..n {
        let len = data.len();
        let at = c.below(len + 1);
        match c.below(8) {
            0 => {
                if at < len {
                    data[at] ^= 1 << c.below(8);
                }
            }
            1 => data.insert(at, c.byte()),
            2 => {
                let end = (at + 1 + c.below(16)).min(len);
                if at < end {
                    data.drain(at..end);
                }
            }
            3 => {
                let t = c.pick(tokens).as_bytes();
                data.splice(at..at, t.iter().copied());
            }
            4 => {
                let end = (at + 1 + c.below(64)).min(len);
                if at < end {
                    let piece = data[at..end].to_vec();
                    let to = c.below(data.len() + 1);
                    data.splice(to..to, piece);
                }
            }
            5 => {
                let bad: &[&[u8]] = &[
                    b"\xff",
                    b"\xc0\x80",
                    b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80",
                    b"\xe2\x82",
                    b"\xef\xbb\xbf",
                    b"\x00",
                ];
                let b = c.pick(bad);
                data.splice(at..at, b.iter().copied());
            }
            6 => data.truncate(at),
            _ => {
                if at < len {
                    data[at] = *c.pick(b"{}[]:,\"\\0123456789.eE-+ \ntfn");
                }
            }
        }
    }
}

pub const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\u0000",
    "\"a\":1,",
    "null",
    "\"kind\":\"x\",",
    "\"request\":{},",
    "\"uid\":1,",
    "1e999",
    "-0",
    "\"\\ud800\"",
    " ",
    "\"operation\":\"DELETE\",",
    "\"object\":null,",
    "\"apiVersion\":\"admission.k8s.io/v1beta1\",",
];

pub const YAML_TOKENS: &[&str] = &[
    "\n---\n",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!binary ",
    "!!int ",
    "!!str ",
    "!!float ",
    "? ",
    ": ",
    "- ",
    "|\n",
    ">-\n",
    "\t",
    "{",
    "}",
    "[",
    "]",
    "'",
    "\"",
    "# c\n",
    "%YAML 1.2\n",
    "...\n",
    "\u{feff}",
    "~",
    "null",
    "0x10",
    "1e3",
    ".inf",
    ".nan",
    "yes",
    "on",
    "<<",
    "!",
    "!!map ",
    "!!seq ",
    "&b [*a, *a]\n",
    "\n  ",
    "\n    - ",
    "\r\n",
    "\"\\u0000\"",
    "2001-01-01",
];

// ---------------------------------------------------------------------------------------
// Structure-aware mutation.

/// A step into a JSON tree.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn all_paths(v: &Json, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                at.push(Step::Key(k.clone()));
                all_paths(x, at, out);
                at.pop();
            }
        }
        Json::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Step::Index(i));
                all_paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'v>(v: &'v mut Json, path: &[Step]) -> Option<&'v mut Json> {
    let mut cur = v;
    for s in path {
        cur = match (s, cur) {
            (Step::Key(k), Json::Object(m)) => m.get_mut(k)?,
            (Step::Index(i), Json::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

const EXPRESSION_KEYS: &[&str] = &["expression", "messageExpression", "valueExpression", "key"];

/// Strings a Kubernetes object or review holds in places that decide things.
const K8S_STRINGS: &[&str] = &[
    "CREATE",
    "UPDATE",
    "DELETE",
    "CONNECT",
    "*",
    "",
    "v1",
    "v1beta1",
    "admission.k8s.io/v1",
    "admission.k8s.io/v1beta1",
    "AdmissionReview",
    "Pod",
    "pods",
    "apps",
    "Deny",
    "Warn",
    "Audit",
    "Fail",
    "Ignore",
    "Equivalent",
    "Exact",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Namespaced",
    "Cluster",
    "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ConfigMap",
    "Namespace",
    "default",
    "kube-system",
    "status",
    "pods/status",
    "*/*",
    "system:masters",
    "Allow",
    "true",
    "null",
    "Namespace",
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
    "NotFound",
];

/// The most bytes one duplication of an array element may add.
const MAX_DUPLICATED: usize = 1 << 20;

/// About how many bytes `v` serialises to, counted up to a little past `cap`.
fn rough_size(v: &Json, cap: usize) -> usize {
    match v {
        Json::String(s) => s.len() + 2,
        Json::Array(a) => {
            let mut n = 2;
            for x in a {
                n += rough_size(x, cap) + 1;
                if n > cap {
                    break;
                }
            }
            n
        }
        Json::Object(m) => {
            let mut n = 2;
            for (k, x) in m {
                n += k.len() + 4 + rough_size(x, cap);
                if n > cap {
                    break;
                }
            }
            n
        }
        _ => 8,
    }
}

/// Applies 1 to 3 structural mutations to `v`.
pub fn mutate_tree(c: &mut Choices, v: &mut Json) {
    let n = 1 + c.below(3);
    for _ in 0..n {
        let mut paths = Vec::new();
        all_paths(v, &mut Vec::new(), &mut paths);
        let path = paths[c.below(paths.len())].clone();
        let last_key = match path.last() {
            Some(Step::Key(k)) => Some(k.clone()),
            _ => None,
        };
        let op = c.below(12);
        if op == 2 {
            // Delete the node from its parent.
            if let Some((last, parent)) = path.split_last() {
                match (last, node_mut(v, parent)) {
                    (Step::Key(k), Some(Json::Object(m))) => {
                        m.remove(k);
                    }
                    (Step::Index(i), Some(Json::Array(a))) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
            continue;
        }
        let Some(node) = node_mut(v, &path) else {
            continue;
        };
        match op {
            0 | 1 => *node = value(c, 3),
            3 => *node = Json::String(c.pick(K8S_STRINGS).to_string()),
            4 => match node {
                Json::Object(m) => {
                    let k = if c.chance(1, 2) {
                        c.pick(KEYS).to_string()
                    } else {
                        c.pick(K8S_STRINGS).to_string()
                    };
                    m.insert(k, value(c, 3));
                }
                Json::Array(a) => a.push(value(c, 3)),
                _ => *node = object(c, 3),
            },
            5 => {
                let inner = node.take();
                *node = match c.below(3) {
                    0 => Json::Array(vec![inner]),
                    1 => {
                        let mut m = Map::new();
                        m.insert(c.pick(KEYS).to_string(), inner);
                        Json::Object(m)
                    }
                    _ => match inner {
                        Json::Array(mut a) if !a.is_empty() => {
                            let x = a[c.below(a.len())].clone();
                            let mut times = 1 + c.below(3) * 40;
                            // Copies of a large element, mutation after mutation, grew inputs
                            // to hundreds of MiB: keep a duplication under 1 MiB.
                            if rough_size(&x, MAX_DUPLICATED) * times > MAX_DUPLICATED {
                                times = 1;
                            }
                            a.extend(std::iter::repeat_n(x, times));
                            Json::Array(a)
                        }
                        other => other,
                    },
                };
            }
            6 => {
                *node = match node.take() {
                    Json::String(s) => s
                        .parse::<i64>()
                        .map(Json::from)
                        .unwrap_or(Json::Bool(s.is_empty())),
                    Json::Number(n) => Json::String(n.to_string()),
                    Json::Bool(b) => Json::String(b.to_string()),
                    Json::Null => Json::String("null".into()),
                    Json::Array(_) => Json::Object(Map::new()),
                    Json::Object(_) => Json::Array(Vec::new()),
                }
            }
            7 => *node = Json::Null,
            8 => {
                // A CEL expression: typed, grammar-aware, or the old one mutated.
                let is_expr = last_key
                    .as_deref()
                    .is_some_and(|k| EXPRESSION_KEYS.contains(&k));
                let old = node.as_str().map(str::to_string);
                let e = match (c.below(4), old) {
                    (0 | 1, Some(old)) if is_expr => cel_gen::mutate_text(c, &old),
                    (2, _) => {
                        let o = root_object(c);
                        cel_gen::typed_expr(c, &o)
                    }
                    _ => cel_gen::grammar_expr(c, 0),
                };
                *node = Json::String(e);
            }
            9 => {
                // Deep nesting.
                let depth = 20 + c.below(150);
                let mut x = node.take();
                for _ in 0..depth {
                    x = if c.chance(1, 2) {
                        Json::Array(vec![x])
                    } else {
                        let mut m = Map::new();
                        m.insert("a".into(), x);
                        Json::Object(m)
                    };
                }
                *node = x;
            }
            10 => {
                *node = match c.below(3) {
                    0 => Json::String("x".repeat(10_000 + c.below(100_000))),
                    1 => Json::Array((0..1000 + c.below(5000)).map(Json::from).collect()),
                    _ => {
                        let mut m = Map::new();
                        for i in 0..500 + c.below(2000) {
                            m.insert(format!("k{i}"), Json::from(i));
                        }
                        Json::Object(m)
                    }
                };
            }
            _ => *node = number(c),
        }
    }
}

/// Line mutations for YAML text: delete, duplicate, swap, re-indent.
pub fn mutate_lines(c: &mut Choices, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = c.below(4);
    for _ in 0..n {
        if lines.is_empty() {
            break;
        }
        let i = c.below(lines.len());
        match c.below(5) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => {
                let j = c.below(lines.len());
                lines.swap(i, j);
            }
            3 => lines[i] = format!("{}{}", " ".repeat(c.below(5)), lines[i]),
            _ => lines[i] = lines[i].trim_start().to_string(),
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// A YAML alias bomb: `levels` anchors, each a list of `fan` aliases to the one before.
pub fn alias_bomb(c: &mut Choices) -> String {
    let levels = 2 + c.below(9);
    let fan = 2 + c.below(9);
    let mut out = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nbomb:\n  l0: &l0 [\"lol\"]\n",
    );
    for l in 1..levels {
        let refs = vec![format!("*l{}", l - 1); fan].join(", ");
        out.push_str(&format!("  l{l}: &l{l} [{refs}]\n"));
    }
    out
}

/// Smaller versions of `v`, each with one node removed or emptied, largest subtrees first
/// (for the reducer).
pub fn removals(v: &Json) -> Vec<Json> {
    let mut paths = Vec::new();
    all_paths(v, &mut Vec::new(), &mut paths);
    paths.sort_by_key(|p| p.len());
    let mut out = Vec::new();
    for path in paths.iter().take(400) {
        let Some((last, parent)) = path.split_last() else {
            continue;
        };
        let mut w = v.clone();
        match (last, node_mut(&mut w, parent)) {
            (Step::Key(k), Some(Json::Object(m))) => {
                m.remove(k);
            }
            (Step::Index(i), Some(Json::Array(a))) if *i < a.len() => {
                a.remove(*i);
            }
            _ => continue,
        }
        out.push(w);
    }
    out
}
