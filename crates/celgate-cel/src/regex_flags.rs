//! Go's reading of flag groups, `(?flags)` and `(?flags:re)` (Go's `regexp/syntax/parse.go`,
//! `parsePerlFlags`), put in front of the Rust parser, which reads them differently.
//!
//! Go knows four flags, `i`, `m`, `s`, `U`, with at most one `-` followed by at least one
//! flag; anything else (Rust's `x`, `u`, `R`, a second `-`, a `-` with no flag after it, a
//! group left open at the end) is `invalid or unsupported Perl syntax`, quoting the group
//! from its `(?` through the character Go stopped at (the whole rest when the pattern ends
//! first). Go also takes what Rust refuses: a repeated flag (`(?ii)`, `(?i-i)`, the last
//! one winning) and an empty `(?)`. Such a group is rewritten, in place and to the same
//! length (so that later errors quote the right part of the pattern), to a Rust form with
//! the same effect, padded with empty captures (CEL never reads group numbers).

/// Go's flags as read from a pattern: the text to give the Rust parser, and Go's error for
/// the first flag group Go refuses, with the byte offset of its `(?`.
#[derive(Debug)]
pub struct GoFlags {
    pub text: String,
    pub error: Option<(usize, String)>,
}

/// Reads `pattern`'s flag groups in order, as Go's parse loop meets them (outside
/// character classes, escapes and `\Q…\E`), up to the first Go refuses.
pub fn go_flags(pattern: &str) -> GoFlags {
    let bytes = pattern.as_bytes();
    let mut text = pattern.to_owned();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i = skip_escape(pattern, i),
            b'[' => i = skip_class(pattern, i),
            b'(' if bytes.get(i + 1) == Some(&b'?') => {
                let rest = &pattern[i..];
                if is_named_group(rest) {
                    // Go reads the name up to the first `>`; a bad name is the names' check
                    // (regex.rs), which also refuses one with no `>`.
                    match rest.find('>') {
                        Some(end) => i += end + 1,
                        None => break,
                    }
                    continue;
                }
                match read_flags(rest) {
                    Err(len) => {
                        let quoted = &rest[..len];
                        let error = format!(
                            "error parsing regexp: invalid or unsupported Perl syntax: `{quoted}`"
                        );
                        return GoFlags {
                            text,
                            error: Some((i, error)),
                        };
                    }
                    Ok(group) => {
                        if let Some(rust) = group.rust_form() {
                            text.replace_range(i..i + group.len, &rust);
                        }
                        i += group.len;
                    }
                }
            }
            // Other bytes, UTF-8 continuation bytes included, are never ASCII syntax.
            _ => i += 1,
        }
    }
    GoFlags { text, error: None }
}

/// Go's test for a named group: `(?P<` with something after it, or `(?<` likewise.
fn is_named_group(rest: &str) -> bool {
    (rest.len() > 4 && rest[2..].starts_with("P<"))
        || (rest.len() > 3 && rest[2..].starts_with('<'))
}

/// Past the escape at `i` (a `\`): `\Q` through its `\E` (or the end), `\p{…}`, `\P{…}`,
/// `\x{…}` through the brace, otherwise the escaped character.
fn skip_escape(pattern: &str, i: usize) -> usize {
    let after = i + 1;
    let Some(c) = pattern[after..].chars().next() else {
        return pattern.len();
    };
    let next = after + c.len_utf8();
    match c {
        'Q' => pattern[next..]
            .find("\\E")
            .map_or(pattern.len(), |end| next + end + 2),
        'p' | 'P' | 'x' if pattern[next..].starts_with('{') => pattern[next..]
            .find('}')
            .map_or(pattern.len(), |end| next + end + 1),
        _ => next,
    }
}

/// Past the character class at `i` (a `[`), as Go's `parseClass` reads it: a `]` first
/// (after an optional `^`) is a member, `[:name:]` is read whole, escapes are skipped.
fn skip_class(pattern: &str, i: usize) -> usize {
    let bytes = pattern.as_bytes();
    let mut j = i + 1;
    if bytes.get(j) == Some(&b'^') {
        j += 1;
    }
    let mut first = true;
    while j < bytes.len() {
        if bytes[j] == b']' && !first {
            return j + 1;
        }
        first = false;
        // On bytes: `j` may be inside a multi-byte character.
        if bytes[j..].starts_with(b"[:") {
            if let Some(end) = bytes[j + 2..].windows(2).position(|w| w == b":]") {
                j += 2 + end + 2;
                continue;
            }
        }
        j = if bytes[j] == b'\\' {
            skip_escape(pattern, j)
        } else {
            j + 1
        };
    }
    pattern.len()
}

/// Go's flags in the order Rust spells them.
const GO_FLAGS: [char; 4] = ['i', 'm', 's', 'U'];

/// A flag group Go takes: its length (`(?` through `)` or `:`) and what it does.
#[derive(Debug)]
struct FlagGroup {
    len: usize,
    /// The characters between `(?` and the terminator.
    written: usize,
    on: Vec<char>,
    off: Vec<char>,
    repeated: bool,
    terminator: char,
}

/// Go's flag loop over `rest` (which starts with `(?`): the group it takes, or the length
/// of what it quotes when it refuses it.
fn read_flags(rest: &str) -> Result<FlagGroup, usize> {
    let mut negated = false;
    let mut saw_flag = false;
    let mut on = Vec::new();
    let mut off = Vec::new();
    let mut repeated = false;
    for (at, c) in rest[2..].char_indices() {
        let end = 2 + at + c.len_utf8();
        match c {
            'i' | 'm' | 's' | 'U' => {
                repeated |= on.contains(&c) || off.contains(&c);
                if negated {
                    on.retain(|&f| f != c);
                    if !off.contains(&c) {
                        off.push(c);
                    }
                } else if !on.contains(&c) {
                    on.push(c);
                }
                saw_flag = true;
            }
            '-' if !negated => {
                negated = true;
                saw_flag = false;
            }
            ':' | ')' if !negated || saw_flag => {
                return Ok(FlagGroup {
                    len: end,
                    written: at,
                    on,
                    off,
                    repeated,
                    terminator: c,
                })
            }
            _ => return Err(end),
        }
    }
    Err(rest.len())
}

impl FlagGroup {
    /// The same group in a form Rust takes, of the same length, when Rust refuses Go's.
    fn rust_form(&self) -> Option<String> {
        if self.written == 0 && self.terminator == ')' {
            // `(?)` changes nothing: an empty alternation in an unread capture.
            return Some("(|)".to_owned());
        }
        if !self.repeated {
            return None;
        }
        let ordered =
            |set: &[char]| -> String { GO_FLAGS.iter().filter(|f| set.contains(f)).collect() };
        let mut flags = ordered(&self.on);
        if !self.off.is_empty() {
            flags.push('-');
            flags.push_str(&ordered(&self.off));
        }
        // Each flag is written once at most, so this is no longer than what Go read.
        let pad = self.written.saturating_sub(flags.len());
        // `u` (Unicode, already on) takes an odd character, empty captures the rest.
        let unicode = if pad % 2 == 1 { "u" } else { "" };
        let captures = "()".repeat(pad / 2);
        Some(match self.terminator {
            ')' => format!("{captures}(?{unicode}{flags})"),
            _ => format!("(?{unicode}{flags}:{captures}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(pattern: &str) -> Option<String> {
        go_flags(pattern).error.map(|(_, e)| {
            e.trim_start_matches("error parsing regexp: invalid or unsupported Perl syntax: ")
                .to_owned()
        })
    }

    /// Go's `parsePerlFlags` (regexp/syntax/parse.go): the `default: break Loop` case, the
    /// second `-`, the `-` with no flag before `:` or `)`, and the group left open, each
    /// quoting `s[:len(s)-len(t)]` (through the rune it stopped at).
    #[test]
    fn flags_go_refuses_quote_through_the_character_go_stopped_at() {
        for (pattern, fragment) in [
            ("(?x)a", "`(?x`"),
            ("a(?u:b)", "`(?u`"),
            ("(?R)$", "`(?R`"),
            ("(?i-x)a", "`(?i-x`"),
            ("(?-u:a)", "`(?-u`"),
            ("(?ix:a)", "`(?ix`"),
            ("(?-)a", "`(?-)`"),
            ("(?s-:a)", "`(?s-:`"),
            ("(?--i)a", "`(?--`"),
            ("(?i-s-m)", "`(?i-s-`"),
            ("(?é)", "`(?é`"),
            ("ab(?is", "`(?is`"),
            ("ab(?", "`(?`"),
        ] {
            assert_eq!(quoted(pattern).as_deref(), Some(fragment), "{pattern}");
        }
    }

    /// Go's parse loop reads a `(` in a class, after `\`, or inside `\Q…\E` as a literal.
    #[test]
    fn flag_groups_are_only_read_where_go_reads_a_group() {
        for pattern in [
            r"[(?x)]",
            r"[]a(?x)]",
            r"[[:alpha:](?x)]",
            r"[é(?x)]",
            r"[^]é[:(?x):]]",
            r"\(?x)",
            r"\Q(?x)\E",
            r"\p{Greek}(?i)a",
            r"(?P<n>(?i)a)",
        ] {
            assert_eq!(quoted(pattern), None, "{pattern}");
        }
        assert_eq!(quoted(r"[a](?x)").as_deref(), Some("`(?x`"));
    }

    /// Go's flag loop takes a repeated flag (the last occurrence decides) and an empty group;
    /// Rust refuses both, so they are rewritten to a form of the same length.
    #[test]
    fn groups_go_takes_and_rust_refuses_are_rewritten_to_the_same_length() {
        for (pattern, rust) in [
            ("(?ii)a", "(?ui)a"),
            ("(?i-i)a", "(?u-i)a"),
            ("(?iii)a", "()(?i)a"),
            ("(?iis:a)", "(?uis:a)"),
            ("(?is-si:a)", "(?-is:()a)"),
            ("(?)a", "(|)a"),
            ("(?i)a", "(?i)a"),
        ] {
            let flags = go_flags(pattern);
            assert_eq!(flags.error, None, "{pattern}");
            assert_eq!(flags.text, rust, "{pattern}");
        }
    }
}
