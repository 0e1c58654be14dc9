//! Regular expressions as cel-go runs them (Go's `regexp`, RE2 syntax): compiling a pattern
//! with Go's parse limits and Go's ASCII Perl classes, with Go's error texts.

use regex_automata::meta;
use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{self, Hir};

use super::error::EvalError;

/// A compiled pattern.
pub type Regex = meta::Regex;

/// Go's largest count in `x{n,m}`, which is also the bound on the product of nested counts
/// (`maxRepeat` of `regexp/syntax`).
const GO_MAX_REPEAT: u32 = 1000;

/// Compiles a pattern: Go's syntax limits and error texts, with Rust's own size limit for
/// what the automaton may take.
pub fn compile_regex(pattern: &str) -> Result<Regex, EvalError> {
    let hir = parse(pattern).map_err(EvalError::new)?;
    build(&hir).map_err(EvalError::new)
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
            if let Some((min, max)) = counts(r) {
                if min > GO_MAX_REPEAT || max.is_some_and(|m| m > GO_MAX_REPEAT) {
                    return Err(invalid(&r.op));
                }
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
    fn errors_read_as_go() {
        assert_eq!(error("["), "error parsing regexp: missing closing ]: `[`");
        assert_eq!(
            error(r"\p{Foo}"),
            "error parsing regexp: invalid character class range: `\\p{Foo}`"
        );
    }
}
