//! Regular expressions as cel-go runs them (Go's `regexp`, RE2 syntax): compiling a pattern
//! with Go's parse limits and Go's ASCII Perl classes, Go's error texts, the bounds on a
//! pattern compiled at run time, and the per-evaluation cache of those patterns.
//!
//! A constant pattern is compiled once, when the expression is compiled. A pattern that is a
//! run-time value (`c.name.matches(object.metadata.annotations.re)`) is compiled during the
//! evaluation, where its cost is cel-go's (⌈0.1·(1+size(string))⌉ · ⌈0.25·size(pattern)⌉,
//! charged before compiling) but its time is ours: Rust's automata are built per class
//! instance, in UTF-8, so `\pL{300}` takes a hundred milliseconds to build, and 200 elements
//! doing so would run for seconds within the cost limit. Hence, for run-time patterns:
//! a length bound and an estimate of the compiled size, both checked before the automaton is
//! built (tens of microseconds), and a cache per evaluation that also keeps failures, so
//! that each distinct pattern is compiled (or refused) once.

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::meta;
use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{self, Class, Hir, HirKind};

use super::error::EvalError;
use super::meter::Meter;

/// A compiled pattern.
pub type Regex = meta::Regex;

/// The longest pattern compiled at run time, in bytes. Parsing is linear but not cheap: up
/// to about a microsecond per byte for the worst shapes (measured in a release build on a
/// busy machine), so this keeps a parse to about 15 ms. Far above any pattern a policy
/// carries in an object or a parameter (an allow-list of 300 registries fits).
pub const MAX_RUNTIME_PATTERN: usize = 16 << 10;

/// The largest compiled form of a pattern compiled at run time, in estimated automaton
/// states ([`estimate`]). Building costs 0.1 to 0.5 µs a state (measured as above), so this
/// keeps one compile to about 10 ms, and a search's worst case (a state set per input byte)
/// in proportion. `.{0,500}`, `\w{1000}` (ASCII, as in Go) or a 3,000-way alternation of
/// short words fit; `\pL{10}` (each instance of a large Unicode class is built anew) does
/// not.
pub const MAX_RUNTIME_STATES: u64 = 25_000;

/// Go's largest count in `x{n,m}`, which is also the bound on the product of nested counts
/// (`maxRepeat` of `regexp/syntax`).
const GO_MAX_REPEAT: u32 = 1000;

/// The bytes a compiled run-time pattern is counted for against the memory ceiling: a fixed
/// part (the matcher's structures) and a part per estimated state.
const REGEX_BASE_BYTES: u64 = 4 << 10;
const REGEX_STATE_BYTES: u64 = 16;

/// Compiles a constant pattern (when the expression is compiled): Go's syntax limits and
/// error texts, with Rust's own size limit for what the automaton may take.
pub fn compile_regex(pattern: &str) -> Result<Regex, EvalError> {
    let hir = parse(pattern).map_err(EvalError::new)?;
    build(&hir).map_err(EvalError::new)
}

/// Compiles a pattern met at run time, refusing one longer than [`MAX_RUNTIME_PATTERN`] or
/// whose estimated compiled size exceeds [`MAX_RUNTIME_STATES`] before building anything.
/// Returns the regex and its estimated size in states.
pub fn compile_runtime_regex(pattern: &str) -> Result<(Regex, u64), EvalError> {
    if pattern.len() > MAX_RUNTIME_PATTERN {
        return Err(EvalError::new(too_large()));
    }
    let hir = parse(pattern).map_err(EvalError::new)?;
    let states = estimate(&hir);
    if states > MAX_RUNTIME_STATES {
        return Err(EvalError::new(too_large()));
    }
    Ok((build(&hir).map_err(EvalError::new)?, states))
}

/// A pattern's outcome: the matcher, or why it does not compile.
type Compiled = Result<Arc<Regex>, EvalError>;

/// The patterns compiled at run time during one evaluation, with their outcome: a pattern
/// met again (the same annotation read for each of 200 containers) is neither compiled nor
/// refused twice.
#[derive(Debug, Default)]
pub struct RegexCache {
    /// Created on the first run-time pattern: most evaluations have none.
    map: Option<HashMap<Box<str>, Compiled>>,
}

impl RegexCache {
    /// `pattern` compiled: from the cache, or compiled now (after a look at the deadline),
    /// its size counted against the memory ceiling and [`Meter::regexes_compiled`] counted.
    pub fn get(&mut self, pattern: &str, meter: &mut Meter) -> Result<Arc<Regex>, EvalError> {
        if let Some(hit) = self.map.as_ref().and_then(|m| m.get(pattern)) {
            return hit.clone();
        }
        meter.check_deadline()?;
        meter.regexes_compiled += 1;
        let (result, bytes) = match compile_runtime_regex(pattern) {
            Ok((re, states)) => (
                Ok(Arc::new(re)),
                REGEX_BASE_BYTES + states.saturating_mul(REGEX_STATE_BYTES),
            ),
            Err(e) => {
                let len = e.message().len() as u64;
                (Err(e), len)
            }
        };
        meter.alloc(bytes.saturating_add(pattern.len() as u64))?;
        self.map
            .get_or_insert_with(HashMap::new)
            .insert(pattern.into(), result.clone());
        result
    }
}

fn too_large() -> String {
    "error parsing regexp: expression too large".into()
}

/// Parses `pattern` as Go's `regexp/syntax` would accept it, into the form to compile:
/// RE2 syntax, Go's limits on counted repetition, and `\d`, `\s`, `\w`, `\b` in ASCII (as
/// in Go; Rust's are Unicode). Errors carry Go's text.
fn parse(pattern: &str) -> Result<Hir, String> {
    let mut ast = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| go_parse_error(pattern, &e))?;
    check_repeats(&ast, pattern)?;
    asciify(&mut ast);
    hir::translate::Translator::new()
        .translate(pattern, &ast)
        .map_err(|e| go_translate_error(pattern, &e))
}

/// Builds the matcher with the settings of `regex::Regex::new`.
fn build(hir: &Hir) -> Result<Regex, String> {
    meta::Builder::new()
        .configure(
            meta::Config::new()
                .nfa_size_limit(Some(10 << 20))
                .hybrid_cache_capacity(2 << 20),
        )
        .build_from_hir(hir)
        .map_err(|e| match e.size_limit() {
            Some(_) => too_large(),
            None => format!("error parsing regexp: {e}"),
        })
}

/// Go's limits on counted repetition, checked as Go's parser does at each `{n,m}` (in the
/// order the operators appear): a count above 1000 is invalid, and so is a repetition whose
/// nested counts multiply past 1000 (`(a{100}){100}`).
fn check_repeats(ast: &Ast, pattern: &str) -> Result<(), String> {
    let invalid = |op: &ast::RepetitionOp| {
        let text = pattern
            .get(op.span.start.offset..op.span.end.offset)
            .unwrap_or("");
        // The operator without a lazy `?`, as Go quotes it.
        let text = text.find('}').map_or(text, |i| &text[..=i]);
        format!("error parsing regexp: invalid repeat count: `{text}`")
    };
    match ast {
        Ast::Repetition(r) => {
            check_repeats(&r.ast, pattern)?;
            let bounds = counts(r);
            if let Some((min, max)) = bounds {
                if min > GO_MAX_REPEAT || max.is_some_and(|m| m > GO_MAX_REPEAT) {
                    return Err(invalid(&r.op));
                }
            }
            // Go (Perl mode) refuses an operator right after another (`a**`, `a{2}*`), quoting
            // both; a group between them (`(?:a*)*`) is fine.
            if let Ast::Repetition(inner) = r.ast.as_ref() {
                let text = pattern
                    .get(inner.op.span.start.offset..r.op.span.end.offset)
                    .unwrap_or("");
                return Err(format!(
                    "error parsing regexp: invalid nested repetition operator: `{text}`"
                ));
            }
            if let Some((min, max)) = bounds {
                if (min >= 2 || max.is_some_and(|m| m >= 2)) && !repeat_is_valid(ast, GO_MAX_REPEAT)
                {
                    return Err(invalid(&r.op));
                }
            }
            Ok(())
        }
        Ast::Group(g) => check_repeats(&g.ast, pattern),
        Ast::Alternation(a) => a.asts.iter().try_for_each(|x| check_repeats(x, pattern)),
        Ast::Concat(c) => c.asts.iter().try_for_each(|x| check_repeats(x, pattern)),
        _ => Ok(()),
    }
}

/// A counted repetition's bounds (`None` for `*`, `+`, `?`).
fn counts(r: &ast::Repetition) -> Option<(u32, Option<u32>)> {
    use ast::RepetitionRange::*;
    match &r.op.kind {
        ast::RepetitionKind::Range(Exactly(n)) => Some((*n, Some(*n))),
        ast::RepetitionKind::Range(AtLeast(n)) => Some((*n, None)),
        ast::RepetitionKind::Range(Bounded(a, b)) => Some((*a, Some(*b))),
        _ => None,
    }
}

/// Go's `repeatIsValid`: the counts along any path below `ast` multiply to at most `n`.
fn repeat_is_valid(ast: &Ast, mut n: u32) -> bool {
    match ast {
        Ast::Repetition(r) => {
            if let Some((min, max)) = counts(r) {
                let m = match max {
                    Some(0) => return true,
                    Some(m) => m,
                    None => min,
                };
                if m > n {
                    return false;
                }
                n = n.checked_div(m).unwrap_or(n);
            }
            repeat_is_valid(&r.ast, n)
        }
        Ast::Group(g) => repeat_is_valid(&g.ast, n),
        Ast::Alternation(a) => a.asts.iter().all(|x| repeat_is_valid(x, n)),
        Ast::Concat(c) => c.asts.iter().all(|x| repeat_is_valid(x, n)),
        _ => true,
    }
}

/// Rewrites the Perl classes and word boundaries to Go's ASCII meaning: `\d` is `[0-9]`,
/// `\w` `[0-9A-Za-z_]`, `\s` `[\t\n\f\r ]` (no `\v`), `\b` an ASCII word boundary.
fn asciify(ast: &mut Ast) {
    match ast {
        Ast::ClassPerl(p) => {
            let span = p.span;
            *ast = Ast::ClassBracketed(Box::new(ast::ClassBracketed {
                span,
                negated: p.negated,
                kind: ast::ClassSet::Item(ascii_perl(p.kind.clone(), span)),
            }));
        }
        Ast::Assertion(a)
            if matches!(
                a.kind,
                ast::AssertionKind::WordBoundary | ast::AssertionKind::NotWordBoundary
            ) =>
        {
            let span = a.span;
            let flag = |kind| ast::FlagsItem { span, kind };
            let inner = std::mem::replace(ast, Ast::empty(span));
            // `(?-u:\b)`
            *ast = Ast::Group(Box::new(ast::Group {
                span,
                kind: ast::GroupKind::NonCapturing(ast::Flags {
                    span,
                    items: vec![
                        flag(ast::FlagsItemKind::Negation),
                        flag(ast::FlagsItemKind::Flag(ast::Flag::Unicode)),
                    ],
                }),
                ast: Box::new(inner),
            }));
        }
        Ast::ClassBracketed(b) => asciify_set(&mut b.kind),
        Ast::Repetition(r) => asciify(&mut r.ast),
        Ast::Group(g) => asciify(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(asciify),
        Ast::Concat(c) => c.asts.iter_mut().for_each(asciify),
        _ => {}
    }
}

fn asciify_set(set: &mut ast::ClassSet) {
    match set {
        ast::ClassSet::Item(item) => asciify_item(item),
        ast::ClassSet::BinaryOp(op) => {
            asciify_set(&mut op.lhs);
            asciify_set(&mut op.rhs);
        }
    }
}

fn asciify_item(item: &mut ast::ClassSetItem) {
    match item {
        ast::ClassSetItem::Perl(p) => {
            let span = p.span;
            let ascii = ascii_perl(p.kind.clone(), span);
            *item = if p.negated {
                ast::ClassSetItem::Bracketed(Box::new(ast::ClassBracketed {
                    span,
                    negated: true,
                    kind: ast::ClassSet::Item(ascii),
                }))
            } else {
                ascii
            };
        }
        ast::ClassSetItem::Bracketed(b) => asciify_set(&mut b.kind),
        ast::ClassSetItem::Union(u) => u.items.iter_mut().for_each(asciify_item),
        _ => {}
    }
}

/// Go's ASCII set for a Perl class, as a class item.
fn ascii_perl(kind: ast::ClassPerlKind, span: ast::Span) -> ast::ClassSetItem {
    let ascii = |kind| {
        ast::ClassSetItem::Ascii(ast::ClassAscii {
            span,
            kind,
            negated: false,
        })
    };
    match kind {
        ast::ClassPerlKind::Digit => ascii(ast::ClassAsciiKind::Digit),
        ast::ClassPerlKind::Word => ascii(ast::ClassAsciiKind::Word),
        // Not `[:space:]`, which has `\v`.
        ast::ClassPerlKind::Space => ast::ClassSetItem::Union(ast::ClassSetUnion {
            span,
            items: ['\t', '\n', '\x0C', '\r', ' ']
                .into_iter()
                .map(|c| {
                    ast::ClassSetItem::Literal(ast::Literal {
                        span,
                        kind: ast::LiteralKind::Verbatim,
                        c,
                    })
                })
                .collect(),
        }),
    }
}

/// An estimate of the compiled automaton's size, in states, from the pattern's tree (where
/// `x{n}` is one node, not n copies): a literal is a state per byte, an ASCII class one per
/// range, a class with non-ASCII members its UTF-8 sequences' bytes plus a fixed part for
/// building it (the dominant cost: each instance is built anew), a repetition its operand
/// times its largest count. Tens of microseconds for any pattern within the length bound.
pub fn estimate(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(l) => l.0.len() as u64,
        HirKind::Class(Class::Bytes(c)) => c.ranges().len() as u64,
        HirKind::Class(Class::Unicode(c)) => {
            if c.ranges().last().is_none_or(|r| r.end().is_ascii()) {
                return c.ranges().len().max(1) as u64;
            }
            let bytes: u64 = c
                .ranges()
                .iter()
                .flat_map(|r| regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end()))
                .map(|s| s.len() as u64)
                .sum();
            20 + bytes
        }
        HirKind::Repetition(r) => {
            let copies = u64::from(r.max.unwrap_or(r.min.saturating_add(1)).max(1));
            estimate(&r.sub).saturating_mul(copies).saturating_add(1)
        }
        HirKind::Capture(c) => estimate(&c.sub).saturating_add(2),
        HirKind::Concat(v) => v.iter().map(estimate).fold(0, u64::saturating_add),
        HirKind::Alternation(v) => v
            .iter()
            .map(estimate)
            .fold(v.len() as u64, u64::saturating_add),
    }
}

/// Go's wording for a pattern that does not parse: its `regexp/syntax` error code and the
/// fragment it blames.
fn go_parse_error(pattern: &str, e: &ast::Error) -> String {
    use regex_syntax::ast::ErrorKind as K;
    let span = e.span();
    let fragment = pattern
        .get(span.start.offset..span.end.offset)
        .unwrap_or(pattern);
    let from_start = pattern.get(span.start.offset..).unwrap_or(pattern);
    let (code, expr) = match e.kind() {
        K::GroupUnclosed => ("missing closing )", pattern),
        K::GroupUnopened => ("unexpected )", pattern),
        K::ClassUnclosed => ("missing closing ]", from_start),
        K::ClassRangeInvalid => ("invalid character class range", fragment),
        K::ClassEscapeInvalid
        | K::EscapeUnrecognized
        | K::EscapeHexInvalid
        | K::EscapeHexEmpty
        | K::EscapeHexInvalidDigit => ("invalid escape sequence", fragment),
        K::EscapeUnexpectedEof => ("trailing backslash at end of expression", ""),
        // Go has no backreferences: `\1` is an escape it does not know.
        K::UnsupportedBackreference => ("invalid escape sequence", fragment),
        K::RepetitionMissing => ("missing argument to repetition operator", fragment),
        K::RepetitionCountInvalid | K::RepetitionCountDecimalEmpty | K::RepetitionCountUnclosed => {
            ("invalid repeat count", fragment)
        }
        K::GroupNameInvalid
        | K::GroupNameEmpty
        | K::GroupNameDuplicate { .. }
        | K::GroupNameUnexpectedEof => ("invalid named capture", fragment),
        K::NestLimitExceeded(_) => ("expression nests too deeply", pattern),
        _ => ("invalid or unsupported Perl syntax", fragment),
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

/// Go's wording for a pattern that parses but names what does not exist (`\p{Foo}`).
fn go_translate_error(pattern: &str, e: &hir::Error) -> String {
    let span = e.span();
    let fragment = pattern
        .get(span.start.offset..span.end.offset)
        .unwrap_or(pattern);
    let code = match e.kind() {
        hir::ErrorKind::UnicodePropertyNotFound | hir::ErrorKind::UnicodePropertyValueNotFound => {
            "invalid character class range"
        }
        _ => "invalid or unsupported Perl syntax",
    };
    format!("error parsing regexp: {code}: `{fragment}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_match(pattern: &str, text: &str) -> bool {
        compile_regex(pattern).unwrap().is_match(text)
    }

    fn error(pattern: &str) -> String {
        compile_regex(pattern).unwrap_err().message().to_string()
    }

    #[test]
    fn perl_classes_and_word_boundaries_are_ascii_as_in_go() {
        assert!(!is_match(r"^\w$", "é"));
        assert!(is_match(r"^\W$", "é"));
        assert!(!is_match(r"^\d$", "٣"));
        assert!(!is_match(r"^\s$", "\u{a0}"));
        assert!(!is_match(r"^\s$", "\x0b"), "Go's \\s has no \\v");
        assert!(is_match(r"^[\s]+$", "\t\n\x0c\r "));
        assert!(is_match(r"^[^\d]$", "x") && !is_match(r"^[^\d]$", "7"));
        assert!(is_match(r"^[\D]$", "é"));
        assert!(is_match(r"^[\w-]+$", "a-b_9"));
        assert!(
            !is_match(r"\bé", "é"),
            "é is not a word character: no boundary"
        );
        assert!(is_match(r"a\b", "aé"), "ASCII boundary between a and é");
        assert!(is_match(r"(?i)^\w+$", "ABCxyz"));
        assert!(is_match(r"\pL", "é"), "\\p classes stay Unicode");
    }

    #[test]
    fn counted_repetition_follows_go_limits() {
        assert!(compile_regex("a{1000}").is_ok());
        assert_eq!(
            error("a{1001}"),
            "error parsing regexp: invalid repeat count: `{1001}`"
        );
        assert_eq!(
            error("(a{100}){11}"),
            "error parsing regexp: invalid repeat count: `{11}`"
        );
        assert!(compile_regex("(a{100}){10}").is_ok());
        assert!(
            compile_regex("((a{100}){11}){0}").is_err(),
            "checked where it is"
        );
        assert!(compile_regex("(a*){1000}").is_ok(), "stars are not counted");
        assert_eq!(
            error("a{2,1}"),
            "error parsing regexp: invalid repeat count: `{2,1}`"
        );
    }

    #[test]
    fn stacked_operators_and_backreferences_are_go_errors() {
        // Recorded from Kubernetes 1.32 (k8s.regex, std.strings).
        for (pattern, want) in [
            ("a**", "invalid nested repetition operator: `**`"),
            ("a*+", "invalid nested repetition operator: `*+`"),
            ("a{2}*", "invalid nested repetition operator: `{2}*`"),
            ("a*??", "invalid nested repetition operator: `*??`"),
            ("(a)\\1", "invalid escape sequence: `\\1`"),
        ] {
            assert_eq!(
                error(pattern),
                format!("error parsing regexp: {want}"),
                "{pattern}"
            );
        }
        assert!(is_match("(?:a*)*", "aa"));
        assert!(is_match("a*?", "aa"));
        assert!(is_match("(a*)+b", "aab"));
    }

    #[test]
    fn errors_read_as_go() {
        assert_eq!(error("["), "error parsing regexp: missing closing ]: `[`");
        assert_eq!(
            error(r"\p{Foo}"),
            "error parsing regexp: invalid character class range: `\\p{Foo}`"
        );
    }

    #[test]
    fn runtime_patterns_are_bounded_before_building() {
        assert!(compile_runtime_regex(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").is_ok());
        assert!(compile_runtime_regex(".{0,500}").is_ok());
        assert!(
            compile_runtime_regex(r"\w{1000}").is_ok(),
            "ASCII \\w is small"
        );
        assert!(compile_runtime_regex(&["abc"; 3000].join("|")).is_ok());
        for big in [r"\pL{300}", r"[\pL\pN]{100}", ".{1000}", r"\pL{10}"] {
            assert_eq!(
                compile_runtime_regex(big).unwrap_err().message(),
                "error parsing regexp: expression too large",
                "{big}"
            );
        }
        let long = "a".repeat(MAX_RUNTIME_PATTERN + 1);
        assert!(compile_runtime_regex(&long).is_err());
    }

    #[test]
    fn the_cache_compiles_each_pattern_once_failures_included() {
        let mut cache = RegexCache::default();
        let mut meter = Meter::default();
        for _ in 0..3 {
            assert!(cache.get("a+", &mut meter).is_ok());
            assert!(cache.get(r"\pL{1000}", &mut meter).is_err());
        }
        assert_eq!(meter.regexes_compiled, 2);
        assert!(meter.memory > 0);
    }
}
