//! Go's `strconv.Quote`, which Kubernetes and cel-go messages use through `%q`: the one
//! quoting every layer shares, so a quoted name reads the same in a CEL error, a CRD
//! validation error and an authorizer's reason.

use std::sync::OnceLock;

/// Go's `strconv.Quote` (what `%q` prints) of a byte string, which Go error messages use for
/// the text they quote. Go strings are bytes: a message may quote a piece cut inside a
/// multi-byte character (`invalid URL escape "%\xe2\x82"`), whose stray bytes print as `\xNN`.
pub fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            go_escape_char(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

/// `strconv.appendEscapedRune` for a `"`-quoted string.
fn go_escape_char(out: &mut String, c: char) {
    match c {
        '"' | '\\' => {
            out.push('\\');
            out.push(c);
        }
        c if is_go_print(c) => out.push(c),
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
fn is_go_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let ranges = printable_ranges();
    // The ranges are sorted and disjoint: the last one starting at or before `c` decides.
    let i = ranges.partition_point(|&(start, _)| start <= c);
    i > 0 && ranges.get(i - 1).is_some_and(|&(_, end)| c <= end)
}

/// The code points of the general categories L, M, N, P and S, from regex-syntax's Unicode
/// tables (already linked for the regex engine), built on first use.
fn printable_ranges() -> &'static [(char, char)] {
    static RANGES: OnceLock<Vec<(char, char)>> = OnceLock::new();
    RANGES.get_or_init(|| {
        use regex_syntax::hir::{Class, HirKind};
        match regex_syntax::parse(r"[\p{L}\p{M}\p{N}\p{P}\p{S}]").map(|h| h.into_kind()) {
            Ok(HirKind::Class(Class::Unicode(class))) => class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect(),
            // Not reached (a constant class; tested below). Without the table, every
            // non-ASCII character would be printed escaped, which is still valid Go syntax.
            _ => Vec::new(),
        }
    })
}

/// [`go_quote`] of a string.
pub fn go_quote_str(s: &str) -> String {
    go_quote(s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_go_strconv_quote() {
        assert!(!printable_ranges().is_empty());
        assert_eq!(go_quote(b"%zz"), r#""%zz""#);
        assert_eq!(go_quote("%€".as_bytes()), r#""%€""#);
        // `'/%€'` cut after two bytes: the stray bytes of the euro sign, as Go prints them.
        assert_eq!(go_quote(&"%€".as_bytes()[..3]), r#""%\xe2\x82""#);
        assert_eq!(go_quote(b"a\"b\\c\n\x01\x7f"), r#""a\"b\\c\n\x01\x7f""#);
        // Marks are printable in Go (Rust's `{:?}` escapes combining marks); NBSP, the soft
        // hyphen, C1 controls and unassigned code points are not.
        assert_eq!(go_quote("e\u{301}".as_bytes()), "\"e\u{301}\"");
        assert_eq!(
            go_quote("\u{a0}\u{ad}\u{85}\u{e0000}".as_bytes()),
            r#""\u00a0\u00ad\u0085\U000e0000""#
        );
        assert_eq!(go_quote("日本 é".as_bytes()), r#""日本 é""#);
    }
}
