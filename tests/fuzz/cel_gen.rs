//! CEL source generators: well-typed expressions built from the library's own overload
//! table over a generated JSON object (for the evaluator), and grammar-aware, corpus-mutated
//! and raw text (for the lexer, parser and checker).

use std::sync::OnceLock;

use celgate::cel::internals::functions;
use celgate::cel::internals::{Bindings, Signature};
use celgate::cel::Type;
use serde_json::Value as Json;

use crate::choices::Choices;

// ---------------------------------------------------------------------------------------
// Pools of interesting literals.

pub const QUANTITIES: &[&str] = &[
    "1",
    "0",
    "1Gi",
    "500m",
    "1.5",
    "1e3",
    "1E",
    "0.1Ki",
    "-1",
    "+1",
    "1e-9",
    "1n",
    "1u",
    "2Ei",
    "999999999999999999999999Ei",
    ".5",
    "1.",
    "1.5e300",
    "",
    "1Mi",
    "100M",
    "1k",
    "9223372036854775807",
    "-9223372036854775808",
    "0.000000001",
    "1e18",
    "12.345678901m",
    "1Ti",
    "3Pi",
    "1e-300",
    "1ki",
    "Gi",
    "1 Gi",
    "0x10",
];
pub const SEMVERS: &[&str] = &[
    "1.0.0",
    "1.2.3-alpha.1+build.5",
    "v1.0.0",
    "01.0.0",
    "1.0",
    "1.0.0-",
    "0.0.0",
    "99999999999999999999.0.0",
    "1.2.3-0alpha",
    "1.2.3+",
    "1.2.3-rc.1",
    "1",
    "",
];
pub const IPS: &[&str] = &[
    "127.0.0.1",
    "::1",
    "fe80::1%eth0",
    "::ffff:1.2.3.4",
    "1.2.3",
    "0.0.0.0",
    "255.255.255.255",
    "2001:db8::",
    "::",
    "192.168.1.300",
    "01.2.3.4",
    "fe80::1",
    "ff02::1",
    "224.0.0.1",
    "169.254.1.1",
    "1:2:3:4:5:6:7:8",
    "",
    "10.0.0.1",
];
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "::/0",
    "192.168.0.1/24",
    "1.2.3.4/33",
    "2001:db8::/129",
    "0.0.0.0/0",
    "2001:db8::/32",
    "10.0.0.0/08",
    "127.0.0.1/32",
    "::ffff:1.2.3.4/128",
    "10.0.0.0",
    "",
];
pub const URLS: &[&str] = &[
    "https://example.com:8080/a/b?x=1&y=2#f",
    "http://[::1]:80/",
    "mailto:x@y",
    "/relative",
    "https://user:pass@host/",
    "%zz",
    "http://h/%2F?q=%E2%82%AC&q=2",
    "https://",
    "http://[fe80::1%25en0]/",
    "ftp://h:99999/",
    "https://ex ample.com",
    "",
    "h://a?;b",
];
pub const DURATIONS: &[&str] = &[
    "1h",
    "1.5h",
    "-2m3s",
    "100ns",
    "1us",
    "1µs",
    "9223372036854775807ns",
    "0",
    "",
    "1d",
    "2562047h",
    "2562048h",
    "1h2m3.5s",
    "-0s",
    ".5s",
    "1.s",
    "1e3s",
    "+1s",
    "s",
    "315576000000s",
    "-315576000001s",
];
pub const TIMESTAMPS: &[&str] = &[
    "2023-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
    "2023-01-01T00:00:00+05:30",
    "10000-01-01T00:00:00Z",
    "2023-02-30T00:00:00Z",
    "2023-01-01T00:00:00",
    "2023-01-01t00:00:00z",
    "1970-01-01T00:00:00.123456789-23:59",
    "",
];
pub const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "+05:30",
    "-08:00",
    "Invalid/Zone",
    "",
    "Local",
    "Asia/Kolkata",
    "-23:59",
    "+24:00",
    "Europe/../etc/passwd",
    "02:00",
];
pub const REGEXES: &[&str] = &[
    "^a",
    "a+",
    "[a-z]+$",
    "(a*)*b",
    "\\\\d{3}",
    "\\\\p{L}+",
    ".{1000}",
    "(?i)abc",
    "(a)\\\\1",
    "[",
    "a{1000}{1000}",
    "(?P<n>x)",
    "^$",
    "\\\\b",
    "x|y|z",
    "[^\\\\x00-\\\\x7f]",
    "(?s).",
    ".*.*.*.*=.*",
    "\\\\",
    "a{2,1}",
    "",
    "(((((((((a)))))))))",
    "[[:alpha:]]",
    "\\\\Q.\\\\E",
];
pub const FORMATS: &[&str] = &[
    "%s", "%d", "%f", "%.3f", "%e", "%x", "%X", "%o", "%b", "%%", "%s %s", "%", "%.1000f", "%5d",
    "%v", "%s%d%f", "%.0e", "%.400f", "%c", "%.-1f",
];
pub const NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
    "nope",
];
pub const SELECTORS: &[&str] = &[
    "a=b",
    "a!=b,c",
    "x in (a,b)",
    "!x",
    "=",
    "a==b",
    "",
    "metadata.name=x",
    "a notin (b)",
    "a,b",
    "a=b=c",
    "(",
    "x in ()",
    "spec.nodeName==",
    "a!b",
];
pub const STRINGS: &[&str] = &[
    "",
    "a",
    "abc",
    "ABC",
    "héllo",
    "日本語",
    "😀",
    "a,b,c",
    " x ",
    "\\\\u0000",
    "1",
    "-1",
    "true",
    "1.5",
    "NaN",
    "inf",
    "0x10",
    "a.b.c",
    "kube-system",
    "foo/bar",
    "ǅ",
    "İ",
    "ß",
    "\\\\U0001F600",
    "\\\\n",
    "a\\\\tb",
    "%s",
    "1e3",
    "18446744073709551615",
    "9223372036854775808",
    "-9223372036854775809",
    "aaaaaaaaaa",
    "aaaaaaaab",
];

/// A CEL string literal for `s` (already escaped where the pool spells escapes), in one of
/// the quoting styles.
/// `s` must have its quotes escaped (pool entries have none; `escape` escapes both kinds).
fn quote(c: &mut Choices, s: &str) -> String {
    match c.below(8) {
        0..=3 => format!("'{s}'"),
        4 | 5 => format!("\"{s}\""),
        6 => format!("'''{s}'''"),
        _ if s.contains('"') || s.contains('\\') => format!("'{s}'"),
        _ => format!("r\"{s}\""),
    }
}

/// Characters that matter to parsers of URLs, IPs, quantities, versions and names, and
/// multi-byte ones (a byte limit can fall inside them).
const PUNCT: &[char] = &[
    '%', '/', ':', '@', '[', ']', '?', '#', '.', '-', '+', '_', '~', '*', '=', ',', ';', ' ', 'é',
    '€', '日', '😀', '\u{301}', '\u{0}', '\u{7f}', '0', '9', 'a', 'Z', '\u{ff}', 'İ',
];

/// `s` with one to three small edits: a character inserted (mostly punctuation or
/// multi-byte), removed, or a piece repeated.
pub fn mutate_small(c: &mut Choices, s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    for _ in 0..1 + c.below(3) {
        let at = c.below(chars.len() + 1);
        match c.below(5) {
            0 | 1 => {
                let ch = if c.chance(3, 4) {
                    *c.pick(PUNCT)
                } else {
                    random_char(c)
                };
                chars.insert(at, ch);
            }
            4 => {
                // Punctuation then a multi-byte character: `%€`, `-é`.
                let p = *c.pick(PUNCT);
                let m = *c.pick(&['é', '€', '日', '😀', '\u{301}', 'İ']);
                chars.splice(at..at, [p, m]);
            }
            2 => {
                if at < chars.len() {
                    chars.remove(at);
                }
            }
            _ => {
                let end = (at + 1 + c.below(4)).min(chars.len());
                if at < end {
                    let piece: Vec<char> = chars[at..end].to_vec();
                    for _ in 0..1 + c.below(40) {
                        chars.splice(at..at, piece.iter().copied());
                    }
                }
            }
        }
    }
    chars.into_iter().collect()
}

/// A string whose length in bytes lands near a limit (63, 253, 1,000 bytes...) in units of
/// one to four bytes.
fn boundary_string(c: &mut Choices) -> String {
    let unit = *c.pick(&["a", "é", "日", "😀", "a-", "-", "a.", "%", "é-", "0"]);
    let target = *c.pick(&[
        62usize, 63, 64, 65, 252, 253, 254, 255, 316, 317, 1000, 1024,
    ]);
    let n = target / unit.len() + c.below(3);
    let mut s = unit.repeat(n.saturating_sub(1));
    if c.chance(1, 2) {
        s.insert(0, 'a');
    }
    s
}

/// Random string content as a CEL literal body: pool entries (already escaped), escapes, or
/// raw text escaped here.
fn string_content(c: &mut Choices) -> String {
    match c.below(9) {
        6 => {
            let base = c_pick(c, STRINGS).to_string();
            escape(&mutate_small(c, &base))
        }
        7 => escape(&boundary_string(c)),
        8 => {
            let n = c.below(12);
            escape(&(0..n).map(|_| random_char(c)).collect::<String>())
        }
        0..=2 => c.pick(STRINGS).to_string(),
        3 => {
            let n = c.below(12);
            (0..n)
                .map(|_| random_char(c))
                .collect::<String>()
                .replace(['\\', '\''], "")
        }
        4 => {
            let esc = [
                "\\n",
                "\\t",
                "\\\\",
                "\\'",
                "\\\"",
                "\\x41",
                "\\101",
                "\\u00e9",
                "\\U0001F600",
                "\\a",
                "\\b",
                "\\f",
                "\\v",
                "\\r",
                "\\?",
                "\\`",
                "\\000",
                "\\u0000",
            ];
            (0..1 + c.below(4)).map(|_| *c.pick(&esc)).collect()
        }
        _ => "x".repeat(c.below(3) * 50 + c.below(4) * 1000),
    }
}

pub fn random_char(c: &mut Choices) -> char {
    const SPECIAL: &[char] = &[
        '(',
        ')',
        '[',
        ']',
        '{',
        '}',
        '.',
        ',',
        '?',
        ':',
        '!',
        '<',
        '>',
        '=',
        '&',
        '|',
        '+',
        '-',
        '*',
        '/',
        '%',
        '\'',
        '"',
        '\\',
        ' ',
        '\n',
        '\t',
        '\r',
        '_',
        '`',
        '#',
        '@',
        '$',
        '~',
        '^',
        ';',
        '\0',
        '\u{feff}',
        '\u{200b}',
        '\u{202e}',
        'é',
        '日',
        '😀',
        '\u{301}',
        '\u{7f}',
        '\u{85}',
        '\u{2028}',
        '\u{ffff}',
        '\u{10ffff}',
    ];
    match c.below(8) {
        0..=3 => (b' ' + c.below(95) as u8) as char,
        4 | 5 => *c.pick(SPECIAL),
        6 => (b'a' + c.below(26) as u8) as char,
        _ => {
            let x = (c.below(0x11_0000) as u32) & 0x10_ffff;
            char::from_u32(x).unwrap_or('\u{fffd}')
        }
    }
}

fn int_literal(c: &mut Choices) -> String {
    match c.below(10) {
        0..=4 => c.below(11).to_string(),
        5 => c
            .pick(&["-1", "-2", "-10", "100", "1000", "-100", "64", "65"])
            .to_string(),
        6 => c
            .pick(&[
                "9223372036854775807",
                "-9223372036854775808",
                "0x7fffffffffffffff",
                "0x10",
                "0XfF",
                "-0x1",
                "4294967296",
                "1000000",
                "-9223372036854775807",
            ])
            .to_string(),
        7 => (c.u64() as i64).to_string(),
        _ => (c.below(200) as i64 - 100).to_string(),
    }
}

fn double_literal(c: &mut Choices) -> String {
    match c.below(6) {
        0..=2 => c
            .pick(&[
                "0.0", "1.5", "-2.5", "0.1", "3.0", "1e3", "2.5e-3", "100.0", "-0.0",
            ])
            .to_string(),
        3 => c
            .pick(&[
                "1e308",
                "-1e308",
                "2.2250738585072014e-308",
                "5e-324",
                "double('NaN')",
                "double('inf')",
                "double('-Infinity')",
                "9223372036854775807.0",
                "1.8446744073709552e19",
                "-9.223372036854776e18",
            ])
            .to_string(),
        _ => {
            let x = f64::from_bits(c.u64());
            if x.is_finite() {
                format!("{x:?}")
            } else {
                "1.0".to_string()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Types.

fn key_type(c: &mut Choices) -> Type {
    match c.below(5) {
        0..=2 => Type::String,
        3 => Type::Int,
        _ => c.pick(&[Type::Bool, Type::Uint]).clone(),
    }
}

const OPAQUES: &[&str] = &[
    "kubernetes.Quantity",
    "kubernetes.Semver",
    "net.IP",
    "net.CIDR",
    "kubernetes.URL",
    "kubernetes.NamedFormat",
];

/// A concrete type (no `dyn`, no parameters).
pub fn random_type(c: &mut Choices, depth: usize) -> Type {
    let nested = depth < 2;
    match c.weighted(&[
        6,
        6,
        2,
        2,
        5,
        1,
        2,
        2,
        if nested { 4 } else { 0 },
        if nested { 2 } else { 0 },
        if nested { 1 } else { 0 },
        2,
    ]) {
        0 => Type::Bool,
        1 => Type::Int,
        2 => Type::Uint,
        3 => Type::Double,
        4 => Type::String,
        5 => Type::Bytes,
        6 => Type::Duration,
        7 => Type::Timestamp,
        8 => Type::list(random_type(c, depth + 1)),
        9 => Type::map(key_type(c), random_type(c, depth + 1)),
        10 => Type::Optional(Box::new(random_type(c, depth + 1))),
        _ => Type::Opaque(c.pick_str(OPAQUES)),
    }
}

fn contains_dyn(t: &Type) -> bool {
    match t {
        Type::Dyn => true,
        Type::List(e) | Type::Optional(e) | Type::TypeOf(e) => contains_dyn(e),
        Type::Map(k, v) => contains_dyn(k) || contains_dyn(v),
        _ => false,
    }
}

fn params_of(t: &Type, out: &mut Vec<(u8, bool)>, as_key: bool) {
    match t {
        Type::Param(p) => out.push((*p, as_key)),
        Type::List(e) | Type::Optional(e) | Type::TypeOf(e) => params_of(e, out, false),
        Type::Map(k, v) => {
            params_of(k, out, true);
            params_of(v, out, false);
        }
        _ => {}
    }
}

/// The overloads the typed generator may call: no `dyn` results (`dyn(x)` is generated as a
/// form of its own).
fn overloads() -> &'static Vec<(&'static str, Signature)> {
    static O: OnceLock<Vec<(&'static str, Signature)>> = OnceLock::new();
    O.get_or_init(|| {
        let mut v: Vec<(&'static str, Signature)> = functions()
            .values()
            .flat_map(|f| f.overloads.iter().map(move |o| (f.name, o.sig.clone())))
            .filter(|(_, s)| !contains_dyn(&s.result) && !matches!(s.result, Type::TypeOf(_)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    })
}

/// Pools for string arguments of particular functions.
fn string_hint(func: &str, arg: usize) -> Option<&'static [&'static str]> {
    Some(match (func, arg) {
        ("quantity" | "isQuantity", _) => QUANTITIES,
        ("semver" | "isSemver", 0) => SEMVERS,
        ("ip" | "isIP" | "ip.isCanonical", _) | ("containsIP", 1) => IPS,
        ("cidr" | "isCIDR", _) | ("containsCIDR", 1) => CIDRS,
        ("url" | "isURL", _) => URLS,
        ("duration", _) => DURATIONS,
        ("timestamp", _) => TIMESTAMPS,
        (f, 1) if f.starts_with("get") => ZONES,
        ("matches" | "find" | "findAll", 1) => REGEXES,
        ("format", 0) => FORMATS,
        ("format.named", 0) => NAMES,
        ("int" | "uint" | "double" | "bool", 0) => STRINGS,
        ("fieldSelector" | "labelSelector", 1) => SELECTORS,
        ("check", 1) => &["get", "list", "*", "delete", "", "create", "GET"],
        ("group", 1) => &["", "apps", "*", "rbac.authorization.k8s.io", "/"],
        ("resource", 1) => &["pods", "deployments", "*", "", "pods/status"],
        ("subresource" | "name" | "namespace", 1) => &["", "status", "web", "default", "*"],
        ("path", 1) => &["/healthz", "/api", "", "*", "/metrics/*", "healthz"],
        ("serviceAccount", _) => &["default", "kube-system", "", "sa", "a:b"],
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// The typed generator.

/// A value reachable from a declared variable, with the kind it has at runtime.
#[derive(Clone, Debug)]
pub struct Path {
    pub expr: String,
    pub ty: Type,
}

pub const RESERVED: &[&str] = &[
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
    "in",
    "null",
    "true",
    "false",
];

fn is_ident(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// `s` escaped for the body of a single- or double-quoted CEL string.
fn escape(s: &str) -> String {
    let lit = cel_string_literal(s);
    let body = &lit[1..lit.len() - 1];
    body.replace('"', "\\\"")
}

fn cel_string_literal(s: &str) -> String {
    let mut out = String::from("'");
    for ch in s.chars() {
        match ch {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The static kind a JSON value has in CEL.
fn json_type(v: &Json) -> Type {
    match v {
        Json::Null => Type::Null,
        Json::Bool(_) => Type::Bool,
        Json::Number(n) if n.as_i64().is_some() => Type::Int,
        Json::Number(_) => Type::Double,
        Json::String(_) => Type::String,
        Json::Array(_) => Type::list(Type::Dyn),
        Json::Object(_) => Type::map(Type::String, Type::Dyn),
    }
}

/// Every value below `root`, as a selection expression and its runtime kind.
pub fn json_paths(root: &str, v: &Json, out: &mut Vec<Path>, limit: usize) {
    fn walk(expr: String, v: &Json, out: &mut Vec<Path>, limit: usize) {
        if out.len() >= limit {
            return;
        }
        out.push(Path {
            expr: expr.clone(),
            ty: json_type(v),
        });
        match v {
            Json::Object(m) => {
                for (k, x) in m {
                    let sel = if is_ident(k) && !RESERVED.contains(&k.as_str()) {
                        format!("{expr}.{k}")
                    } else {
                        format!("{expr}[{}]", cel_string_literal(k))
                    };
                    walk(sel, x, out, limit);
                }
            }
            Json::Array(a) => {
                for (i, x) in a.iter().enumerate().take(8) {
                    walk(format!("{expr}[{i}]"), x, out, limit);
                }
            }
            _ => {}
        }
    }
    walk(root.to_string(), v, out, limit);
}

pub struct Gen<'p> {
    paths: &'p [Path],
    scope: Vec<(String, Type)>,
    nodes: usize,
    max_nodes: usize,
    max_depth: usize,
}

const VARS: &[&str] = &["x", "y", "i", "v", "k", "e", "__x", "z"];

impl<'p> Gen<'p> {
    pub fn new(paths: &'p [Path], c: &mut Choices) -> Self {
        Gen {
            paths,
            scope: Vec::new(),
            nodes: 0,
            max_nodes: 20 + c.below(60),
            max_depth: 3 + c.below(5),
        }
    }

    /// An expression whose value has type `ty` (when it does not fail).
    pub fn gen(&mut self, c: &mut Choices, ty: &Type, depth: usize) -> String {
        self.nodes += 1;
        let ty = if ty.is_dyn() {
            // A dyn value from the JSON (its kind decided by the document), or any kind.
            if c.chance(1, 3) {
                if let Some(p) = self.pick_path(c, |_| true) {
                    return p;
                }
            }
            random_type(c, depth.min(2))
        } else {
            ty.clone()
        };
        if depth >= self.max_depth || self.nodes >= self.max_nodes || c.below(10) < 3 {
            return self.leaf(c, &ty, depth);
        }
        for _ in 0..3 {
            if let Some(e) = self.compound(c, &ty, depth) {
                return e;
            }
        }
        self.leaf(c, &ty, depth)
    }

    fn pick_path(&self, c: &mut Choices, want: impl Fn(&Type) -> bool) -> Option<String> {
        let mut cands: Vec<&str> = self
            .paths
            .iter()
            .filter(|p| want(&p.ty))
            .map(|p| p.expr.as_str())
            .collect();
        cands.extend(
            self.scope
                .iter()
                .filter(|(_, t)| !t.is_dyn() && want(t))
                .map(|(n, _)| n.as_str()),
        );
        if cands.is_empty() {
            None
        } else {
            Some(c.pick(&cands).to_string())
        }
    }

    fn leaf(&mut self, c: &mut Choices, ty: &Type, depth: usize) -> String {
        if c.chance(1, 2) {
            if let Some(p) = self.pick_path(c, |t| t == ty) {
                return p;
            }
        }
        self.literal(c, ty, depth)
    }

    fn literal(&mut self, c: &mut Choices, ty: &Type, depth: usize) -> String {
        match ty {
            // A wrapper's literals are its primitive's.
            Type::Wrapper(inner) => self.literal(c, inner, depth),
            Type::Bool => c.pick(&["true", "false"]).to_string(),
            Type::Int => int_literal(c),
            Type::Uint => {
                let s = int_literal(c);
                let s = s.trim_start_matches('-');
                if c.chance(1, 8) {
                    "18446744073709551615u".to_string()
                } else {
                    format!("{s}u")
                }
            }
            Type::Double => double_literal(c),
            Type::String => {
                let s = string_content(c);
                quote(c, &s)
            }
            Type::Bytes => {
                let s = string_content(c);
                let s = if c.chance(1, 3) {
                    format!("{s}\\xff\\x00")
                } else {
                    s
                };
                format!("b{}", quote(c, &s))
            }
            Type::Null => "null".into(),
            Type::Duration => {
                let s = c_pick(c, DURATIONS);
                format!("duration({})", quote(c, s))
            }
            Type::Timestamp => {
                if c.chance(1, 4) {
                    format!("timestamp({})", int_literal(c))
                } else {
                    let s = c_pick(c, TIMESTAMPS);
                    format!("timestamp({})", quote(c, s))
                }
            }
            Type::List(e) => {
                let n = c.below(4);
                let items: Vec<String> = (0..n).map(|_| self.gen(c, e, depth + 1)).collect();
                format!("[{}]", items.join(", "))
            }
            Type::Map(k, v) => {
                let n = c.below(3);
                let items: Vec<String> = (0..n)
                    .map(|_| {
                        let key = self.literal(c, k, depth + 1);
                        format!("{key}: {}", self.gen(c, v, depth + 1))
                    })
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            Type::Optional(t) => {
                if c.chance(1, 3) {
                    "optional.none()".into()
                } else {
                    format!("optional.of({})", self.gen(c, t, depth + 1))
                }
            }
            Type::Opaque(name) if name.starts_with("kubernetes.authorization") => {
                match name.rsplit('.').next().unwrap_or("") {
                    "Authorizer" => c
                        .pick(&["authorizer", "authorizer.serviceAccount('default', 'sa')"])
                        .to_string(),
                    "GroupCheck" => "authorizer.group('apps')".into(),
                    "PathCheck" => "authorizer.path('/healthz')".into(),
                    "Decision" => "authorizer.requestResource.check('get')".into(),
                    _ => c
                        .pick(&[
                            "authorizer.requestResource",
                            "authorizer.group('').resource('pods')",
                        ])
                        .to_string(),
                }
            }
            Type::Opaque(name) => {
                let (f, pool) = match *name {
                    "kubernetes.Quantity" => ("quantity", QUANTITIES),
                    "kubernetes.Semver" => ("semver", SEMVERS),
                    "net.IP" => ("ip", IPS),
                    "net.CIDR" => ("cidr", CIDRS),
                    "kubernetes.URL" => ("url", URLS),
                    _ => {
                        let n = c_pick(c, NAMES);
                        return if n == "nope" {
                            "format.named('dns1123Label').value()".into()
                        } else {
                            format!("format.{n}()")
                        };
                    }
                };
                let s = c_pick(c, pool);
                format!("{f}({})", quote(c, s))
            }
            Type::TypeOf(_) => c
                .pick(&["int", "string", "bool", "type", "dyn"])
                .to_string(),
            Type::Object(o) if o.name == "kubernetes.AdmissionRequest" => "request".into(),
            Type::Object(_) => "namespaceObject".into(),
            Type::Dyn | Type::Param(_) => "null".into(),
        }
    }

    fn compound(&mut self, c: &mut Choices, ty: &Type, depth: usize) -> Option<String> {
        let d = depth + 1;
        match c.weighted(&[14, 3, 2, 2, 3, 4, 1]) {
            0 => self.call(c, ty, d),
            1 => {
                let cond = self.gen(c, &Type::Bool, d);
                let a = self.gen(c, ty, d);
                let b = self.gen(c, ty, d);
                Some(format!("({cond} ? {a} : {b})"))
            }
            2 => Some(format!("dyn({})", self.gen(c, ty, d))),
            3 => {
                // Indexing a list or a map that holds the type.
                if c.chance(1, 2) {
                    let l = self.gen(c, &Type::list(ty.clone()), d);
                    let i = self.gen(c, &Type::Int, d);
                    Some(format!("{}[{i}]", recv(&l)))
                } else {
                    let k = key_type(c);
                    let m = self.gen(c, &Type::map(k.clone(), ty.clone()), d);
                    let key = self.gen(c, &k, d);
                    Some(format!("{}[{key}]", recv(&m)))
                }
            }
            4 => self.macro_for(c, ty, d),
            5 => self.special(c, ty, d),
            _ => {
                // `.orValue` of an optional selection.
                let o = self.optional_of(c, ty, d)?;
                let dflt = self.gen(c, ty, d);
                Some(format!("{o}.orValue({dflt})"))
            }
        }
    }

    /// Optional values of type `ty` from the optional syntax.
    fn optional_of(&mut self, c: &mut Choices, ty: &Type, d: usize) -> Option<String> {
        match c.below(4) {
            0 => {
                let l = self.gen(c, &Type::list(ty.clone()), d);
                let i = self.gen(c, &Type::Int, d);
                Some(format!("{}[?{i}]", recv(&l)))
            }
            1 => {
                let m = self.gen(c, &Type::map(Type::String, ty.clone()), d);
                let f = c.pick(&["a", "b", "name", "x"]);
                Some(format!("{}.?{f}", recv(&m)))
            }
            2 => {
                let p = self.pick_path(c, |t| matches!(t, Type::Map(..)))?;
                let f = c.pick(&["a", "b", "name", "metadata", "spec", "x", "items"]);
                Some(format!("{p}.?{f}"))
            }
            _ => {
                let o = self.gen(c, &Type::Optional(Box::new(ty.clone())), d);
                Some(o)
            }
        }
    }

    fn special(&mut self, c: &mut Choices, ty: &Type, d: usize) -> Option<String> {
        match ty {
            Type::Bool => Some(match c.below(7) {
                0 => format!("({} && {})", self.gen(c, ty, d), self.gen(c, ty, d)),
                1 => format!("({} || {})", self.gen(c, ty, d), self.gen(c, ty, d)),
                2 => {
                    let p = self.pick_path(c, |t| matches!(t, Type::Map(..)))?;
                    let f = c.pick(&["a", "b", "name", "metadata", "spec", "x", "items", "labels"]);
                    format!("has({p}.{f})")
                }
                3 => {
                    let t = random_type(c, 1);
                    let x = self.gen(c, &t, d);
                    let l = self.gen(c, &Type::list(t), d);
                    format!("({x} in {l})")
                }
                4 => {
                    let t = random_type(c, 1);
                    format!("({} == {})", self.gen(c, &t, d), self.gen(c, &t, d))
                }
                5 => {
                    let t = random_type(c, 1);
                    let tn = match &t {
                        Type::List(_) => "list".to_string(),
                        Type::Map(..) => "map".to_string(),
                        Type::Optional(_) => "optional_type".to_string(),
                        other => other.to_string(),
                    };
                    format!("(type({}) == {tn})", self.gen(c, &t, d))
                }
                _ => format!("!{}", self.gen(c, ty, d)),
            }),
            Type::Optional(inner) => self.optional_of(c, inner, d),
            Type::List(e) => Some(match c.below(3) {
                0 => format!("({} + {})", self.gen(c, ty, d), self.gen(c, ty, d)),
                1 => {
                    // Optional elements.
                    let a = self.gen(c, e, d);
                    let o = self.gen(c, &Type::Optional(e.clone()), d);
                    format!("[{a}, ?{o}]")
                }
                _ => {
                    // A long list (past the document's element-table threshold) of one short
                    // literal; only of scalars, so that nesting cannot multiply its size.
                    if matches!(**e, Type::List(_) | Type::Map(..) | Type::Optional(_)) {
                        return None;
                    }
                    let n = 60 + c.below(20);
                    let x = self.literal(c, e, self.max_depth);
                    format!("[{}]", vec![x; n].join(", "))
                }
            }),
            Type::Map(k, v) => {
                let key = self.literal(c, k, d);
                let o = self.gen(c, &Type::Optional(v.clone()), d);
                Some(format!("{{?{key}: {o}}}"))
            }
            _ => None,
        }
    }

    fn with_var<T>(&mut self, name: &str, ty: Type, f: impl FnOnce(&mut Self) -> T) -> T {
        self.scope.push((name.to_string(), ty));
        let r = f(self);
        self.scope.pop();
        r
    }

    /// A comprehension over a generated list or map whose result has type `ty`.
    fn macro_for(&mut self, c: &mut Choices, ty: &Type, d: usize) -> Option<String> {
        let v1 = c.pick(VARS).to_string();
        let mut v2 = c.pick(VARS).to_string();
        if v2 == v1 {
            v2 = format!("{v1}2");
        }
        let elem = random_type(c, 1);
        let over_map = c.chance(1, 4);
        let (range_ty, t1, t2) = if over_map {
            let k = key_type(c);
            (Type::map(k.clone(), elem.clone()), k, elem.clone())
        } else {
            (Type::list(elem.clone()), elem.clone(), elem.clone())
        };
        let range = if c.chance(1, 4) {
            // A JSON list or map: dyn elements.
            let p = self.pick_path(c, |t| matches!(t, Type::List(_) | Type::Map(..)));
            match p {
                Some(p) => {
                    let r = recv(&p);
                    return self.macro_over(
                        c,
                        ty,
                        d,
                        &r,
                        Type::Dyn,
                        Type::Dyn,
                        Type::Dyn,
                        &v1,
                        &v2,
                    );
                }
                None => self.gen(c, &range_ty, d),
            }
        } else {
            self.gen(c, &range_ty, d)
        };
        let r = recv(&range);
        let pos = if over_map { t1.clone() } else { Type::Int };
        let first = if over_map { t1 } else { elem };
        self.macro_over(c, ty, d, &r, first, pos, t2, &v1, &v2)
    }

    #[allow(clippy::too_many_arguments)]
    fn macro_over(
        &mut self,
        c: &mut Choices,
        ty: &Type,
        d: usize,
        r: &str,
        first: Type,
        pos: Type,
        second: Type,
        v1: &str,
        v2: &str,
    ) -> Option<String> {
        match ty {
            Type::Bool => {
                let m = c.pick(&["all", "exists", "exists_one", "existsOne"]);
                if c.chance(1, 3) {
                    let body = self.with_var(v1, pos, |g| {
                        g.with_var(v2, second, |g| g.gen(c, &Type::Bool, d))
                    });
                    Some(format!("{r}.{m}({v1}, {v2}, {body})"))
                } else {
                    let body = self.with_var(v1, first, |g| g.gen(c, &Type::Bool, d));
                    Some(format!("{r}.{m}({v1}, {body})"))
                }
            }
            Type::List(out) => match c.below(5) {
                0 | 1 => {
                    let (filter, body) = self.with_var(v1, first, |g| {
                        let f = c.chance(1, 3).then(|| g.gen(c, &Type::Bool, d));
                        (f, g.gen(c, out, d))
                    });
                    Some(match filter {
                        Some(f) => format!("{r}.map({v1}, {f}, {body})"),
                        None => format!("{r}.map({v1}, {body})"),
                    })
                }
                2 => {
                    let body =
                        self.with_var(v1, pos, |g| g.with_var(v2, second, |g| g.gen(c, out, d)));
                    Some(format!("{r}.transformList({v1}, {v2}, {body})"))
                }
                3 => {
                    // filter keeps the range's element type: only when it is the one wanted.
                    if &first != out.as_ref() {
                        return None;
                    }
                    let body = self.with_var(v1, first, |g| g.gen(c, &Type::Bool, d));
                    Some(format!("{r}.filter({v1}, {body})"))
                }
                _ => {
                    if &first != out.as_ref() || r.starts_with('{') {
                        return None;
                    }
                    let kt = c
                        .pick(&[Type::Int, Type::String, Type::Double, Type::Bool])
                        .clone();
                    let key = self.with_var(v1, first, |g| g.gen(c, &kt, d));
                    Some(format!("{r}.sortBy({v1}, {key})"))
                }
            },
            Type::Map(k, v) => {
                if c.chance(1, 2) && pos == **k {
                    let body =
                        self.with_var(v1, pos, |g| g.with_var(v2, second, |g| g.gen(c, v, d)));
                    Some(format!("{r}.transformMap({v1}, {v2}, {body})"))
                } else {
                    let body = self.with_var(v1, pos, |g| {
                        g.with_var(v2, second, |g| {
                            let key = g.gen(c, k, d);
                            let val = g.gen(c, v, d);
                            format!("{{{key}: {val}}}")
                        })
                    });
                    Some(format!("{r}.transformMapEntry({v1}, {v2}, {body})"))
                }
            }
            Type::Optional(out) => {
                let o = self.gen(c, &Type::Optional(Box::new(first.clone())), d);
                let body = self.with_var(v1, first, |g| g.gen(c, out, d));
                Some(format!("{}.optMap({v1}, {body})", recv(&o)))
            }
            _ => {
                // Any other type: the first element of a mapped list.
                let body = self.with_var(v1, first, |g| g.gen(c, ty, d));
                Some(format!("{r}.map({v1}, {body})[0]"))
            }
        }
    }

    /// A call of a library overload whose result is `ty`.
    fn call(&mut self, c: &mut Choices, ty: &Type, d: usize) -> Option<String> {
        let cands: Vec<&(&'static str, Signature)> = overloads()
            .iter()
            .filter(|(_, s)| Bindings::default().accepts(&s.result, ty))
            .collect();
        if cands.is_empty() {
            return None;
        }
        let (name, sig) = *c.pick(&cands);
        let mut b = Bindings::default();
        b.accepts(&sig.result, ty);
        let mut ps = Vec::new();
        for p in &sig.params {
            params_of(p, &mut ps, false);
        }
        for (p, as_key) in ps {
            if b.substitute(&Type::Param(p)).is_dyn() {
                let t = if as_key {
                    key_type(c)
                } else {
                    random_type(c, 1)
                };
                b.accepts(&Type::Param(p), &t);
            }
        }
        let args: Vec<String> = sig
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let t = b.substitute(p);
                if t == Type::String {
                    if let Some(pool) = string_hint(name, i) {
                        if c.chance(3, 4) {
                            let s = c_pick(c, pool);
                            if c.chance(1, 3) {
                                let m = escape(&mutate_small(c, s));
                                return quote(c, &m);
                            }
                            return quote(c, s);
                        }
                    }
                }
                self.gen(c, &t, d)
            })
            .collect();
        Some(render_call(name, sig.member, &args))
    }
}

fn c_pick<'s>(c: &mut Choices, pool: &[&'s str]) -> &'s str {
    pool[c.below(pool.len())]
}

/// Wraps an expression in parentheses where a member call on it would bind differently.
fn recv(e: &str) -> String {
    let simple = e
        .chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_' || ch == '(' || ch == '[')
        && !e.contains(' ');
    if simple {
        e.to_string()
    } else {
        format!("({e})")
    }
}

fn render_call(name: &str, member: bool, args: &[String]) -> String {
    let op = match name {
        "_+_" => Some("+"),
        "_-_" => Some("-"),
        "_*_" => Some("*"),
        "_/_" => Some("/"),
        "_%_" => Some("%"),
        "_==_" => Some("=="),
        "_!=_" => Some("!="),
        "_<_" => Some("<"),
        "_<=_" => Some("<="),
        "_>_" => Some(">"),
        "_>=_" => Some(">="),
        "@in" => Some("in"),
        _ => None,
    };
    if let (Some(op), [a, b]) = (op, args) {
        return format!("({a} {op} {b})");
    }
    match (name, args) {
        ("!_", [a]) => return format!("(!{a})"),
        ("-_", [a]) => return format!("(-{a})"),
        _ => {}
    }
    if member {
        if let Some((r, rest)) = args.split_first() {
            return format!("{}.{name}({})", recv(r), rest.join(", "));
        }
    }
    format!("{name}({})", args.join(", "))
}

/// Paths of the request and namespace variables (fixed values, see `targets::REQUEST`).
pub fn fixed_paths() -> Vec<Path> {
    let p = |e: &str, ty: Type| Path { expr: e.into(), ty };
    vec![
        p("request.operation", Type::String),
        p("request.name", Type::String),
        p("request.namespace", Type::String),
        p("request.userInfo.username", Type::String),
        p("request.userInfo.groups", Type::list(Type::String)),
        p("request.kind.kind", Type::String),
        p("request.resource.resource", Type::String),
        p("request.dryRun", Type::Bool),
        p("namespaceObject.metadata.name", Type::String),
        p(
            "namespaceObject.metadata.labels",
            Type::map(Type::String, Type::String),
        ),
    ]
}

/// A well-typed expression over `object` (and `params`, `oldObject`, bound to the same
/// document) of a random result type, mostly `bool` as validations are.
pub fn typed_expr(c: &mut Choices, object: &Json) -> String {
    let mut paths = fixed_paths();
    let root = *c.pick(&["object", "object", "object", "params", "oldObject"]);
    json_paths(root, object, &mut paths, 200);
    let mut g = Gen::new(&paths, c);
    let ty = if c.chance(2, 3) {
        Type::Bool
    } else {
        random_type(c, 0)
    };
    let e = g.gen(c, &ty, 0);
    // A guard against any other multiplication: the parser's limit is 100,000 code points.
    if e.len() > 200_000 {
        "true".to_string()
    } else {
        e
    }
}

// ---------------------------------------------------------------------------------------
// Grammar-aware untyped source, corpus mutation and raw text for the parser and checker.

const IDENTS: &[&str] = &[
    "object",
    "oldObject",
    "params",
    "request",
    "namespaceObject",
    "authorizer",
    "variables",
    "x",
    "y",
    "undefined",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "list",
    "map",
    "type",
    "null_type",
    "dyn",
    "google",
    "protobuf",
    "Timestamp",
    "as",
    "namespace",
    "in",
    "__result__",
    "@it",
    "kubernetes",
    "_",
    "ɑ",
    "e1",
];

fn func_names() -> &'static Vec<&'static str> {
    static F: OnceLock<Vec<&'static str>> = OnceLock::new();
    F.get_or_init(|| {
        let mut v: Vec<&'static str> = functions().keys().copied().collect();
        v.extend([
            "all",
            "exists",
            "exists_one",
            "existsOne",
            "map",
            "filter",
            "has",
            "transformList",
            "transformMap",
            "transformMapEntry",
            "sortBy",
            "optMap",
            "optFlatMap",
            "bind",
            "cel.bind",
            "getField",
            "nope",
        ]);
        v.sort();
        v
    })
}

const BINOPS: &[&str] = &[
    "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in", "=", "!", "&",
    "|", "**", "===", "<>", "?",
];

/// Untyped expression text following CEL's grammar, with the library's names and macros, so
/// that most of it parses and the checker sees every kind of call.
pub fn grammar_expr(c: &mut Choices, depth: usize) -> String {
    if depth > 8 || c.below(10) < 3 {
        return match c.below(6) {
            0 => c.pick(IDENTS).to_string(),
            1 => int_literal(c),
            2 => double_literal(c),
            3 => {
                let s = string_content(c);
                quote(c, &s)
            }
            4 => c
                .pick(&["true", "false", "null", "[]", "{}", "1u", "b'x'"])
                .to_string(),
            _ => format!("{}u", c.below(100)),
        };
    }
    let d = depth + 1;
    match c.below(14) {
        0 => format!(
            "({} {} {})",
            grammar_expr(c, d),
            c.pick(BINOPS),
            grammar_expr(c, d)
        ),
        1 => format!(
            "{}{}",
            c.pick(&["!", "-", "!!", "--", "~", "+"]),
            grammar_expr(c, d)
        ),
        2 => format!(
            "{} ? {} : {}",
            grammar_expr(c, d),
            grammar_expr(c, d),
            grammar_expr(c, d)
        ),
        3 | 4 => {
            let f = c.pick(func_names());
            let n = c.below(4);
            let args: Vec<String> = (0..n).map(|_| grammar_expr(c, d)).collect();
            format!("{f}({})", args.join(", "))
        }
        5 | 6 => {
            let f = c.pick(func_names());
            let n = c.below(4);
            let args: Vec<String> = (0..n)
                .map(|_| {
                    if c.chance(1, 3) {
                        c.pick(VARS).to_string()
                    } else {
                        grammar_expr(c, d)
                    }
                })
                .collect();
            format!("{}.{f}({})", recv(&grammar_expr(c, d)), args.join(", "))
        }
        7 => format!(
            "{}{}{}",
            grammar_expr(c, d),
            c.pick(&[".", ".?"]),
            c.pick(&[
                "a",
                "metadata",
                "spec",
                "name",
                "in",
                "1",
                "",
                "namespace",
                "?x"
            ])
        ),
        8 => format!(
            "{}[{}{}]",
            grammar_expr(c, d),
            if c.chance(1, 4) { "?" } else { "" },
            grammar_expr(c, d)
        ),
        9 => {
            let n = c.below(4);
            let items: Vec<String> = (0..n)
                .map(|_| {
                    let opt = if c.chance(1, 5) { "?" } else { "" };
                    format!("{opt}{}", grammar_expr(c, d))
                })
                .collect();
            format!(
                "[{}{}]",
                items.join(", "),
                if c.chance(1, 6) { "," } else { "" }
            )
        }
        10 => {
            let n = c.below(3);
            let items: Vec<String> = (0..n)
                .map(|_| {
                    let opt = if c.chance(1, 5) { "?" } else { "" };
                    format!("{opt}{}: {}", grammar_expr(c, d), grammar_expr(c, d))
                })
                .collect();
            let name = if c.chance(1, 4) {
                *c.pick(&[
                    "Foo",
                    "google.protobuf.Duration",
                    ".a.B",
                    "kubernetes.Quantity",
                ])
            } else {
                ""
            };
            format!("{name}{{{}}}", items.join(", "))
        }
        11 => format!("has({})", grammar_expr(c, d)),
        12 => deep(c),
        _ => format!("({})", grammar_expr(c, d)),
    }
}

/// A deep construct near the parser's limits (250 levels of nesting, 100,000 code points).
pub fn deep(c: &mut Choices) -> String {
    let n = match c.below(4) {
        0 => 50 + c.below(200),
        1 => 240 + c.below(20),
        2 => 10 + c.below(40),
        _ => 240 + c.below(2000),
    };
    let inner = c
        .pick(&["1", "x", "object", "true", "[]", "'a'"])
        .to_string();
    match c.below(14) {
        0 => format!("{}{inner}{}", "(".repeat(n), ")".repeat(n)),
        1 => format!("{}{inner}{}", "[".repeat(n), "]".repeat(n)),
        2 => format!("{}true", "!".repeat(n)),
        3 => format!("{}1", "-".repeat(n)),
        4 => vec!["1"; n].join(" + "),
        5 => vec!["true"; n].join(" && "),
        6 => vec!["false"; n].join(" || "),
        7 => format!("object{}", ".a".repeat(n)),
        8 => format!("{}{inner}", "true ? 1 : ".repeat(n)),
        9 => format!("{}{inner}{}", "{'a': ".repeat(n), "}".repeat(n)),
        10 => format!("[1]{}", ".map(x, x)".repeat(n.min(300))),
        11 => format!("{}{inner}{}", "size(".repeat(n), ")".repeat(n)),
        12 => format!("'{}'", "a".repeat(n * 50)),
        _ => format!(
            "{}{inner}{}",
            "[1].all(x, ".repeat(n.min(300)),
            ")".repeat(n.min(300))
        ),
    }
}

/// Raw text: arbitrary characters, weighted towards CEL's punctuation.
pub fn raw_text(c: &mut Choices) -> String {
    let n = c.below(80);
    (0..n).map(|_| random_char(c)).collect()
}

/// A token soup: CEL tokens in a random order.
pub fn token_soup(c: &mut Choices) -> String {
    const TOKENS: &[&str] = &[
        "(", ")", "[", "]", "{", "}", ".", ",", "?", ":", "!", "<", ">", "=", "==", "!=", "&&",
        "||", "+", "-", "*", "/", "%", "in", ".?", "[?", "{?", "'", "\"", "'''", "\"\"\"", "r'",
        "b'", "1", "1u", "1.5", "1e", "0x", ".5", "x", "all", "map", "has", "null", "true", " ",
        "\n", "//c\n", "\\", "\\u", "\\x", "@in", "_+_", "size", "1e999", "0777",
    ];
    let n = c.below(30);
    (0..n).map(|_| *c.pick(TOKENS)).collect::<Vec<_>>().join("")
}

/// Applies 1 to 4 text mutations to `s`.
pub fn mutate_text(c: &mut Choices, s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    let n = 1 + c.below(4);
    for _ in 0..n {
        let len = chars.len();
        let at = c.below(len + 1);
        match c.below(7) {
            0 => {
                // Delete a range.
                let end = (at + 1 + c.below(8)).min(len);
                if at < end {
                    chars.drain(at..end);
                }
            }
            1 => {
                let ch = random_char(c);
                chars.insert(at, ch);
            }
            2 => {
                let t = token_soup(c);
                for (i, ch) in t.chars().enumerate() {
                    chars.insert(at + i, ch);
                }
            }
            3 => {
                // Duplicate a range.
                let end = (at + 1 + c.below(20)).min(len);
                if at < end {
                    let piece: Vec<char> = chars[at..end].to_vec();
                    let to = c.below(chars.len() + 1);
                    for (i, ch) in piece.into_iter().enumerate() {
                        chars.insert(to + i, ch);
                    }
                }
            }
            4 => {
                if at < len {
                    chars[at] = random_char(c);
                }
            }
            5 => {
                let e = grammar_expr(c, 5);
                for (i, ch) in e.chars().enumerate() {
                    chars.insert(at + i, ch);
                }
            }
            _ => {
                chars.truncate(at);
            }
        }
    }
    chars.into_iter().collect()
}
