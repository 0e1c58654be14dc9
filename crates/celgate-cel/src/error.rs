//! Errors of the CEL engine: compile-time (syntax and check) errors with their position, and
//! evaluation errors with cel-go's wording.

use std::fmt;

/// A syntax error at a byte offset of the source.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Where, in bytes from the start of the source.
    pub offset: usize,
    /// cel-go's message.
    pub message: String,
}

/// One compile error (syntax or type check) with its position in the expression.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Issue {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// cel-go's message.
    pub message: String,
}

/// Why an expression did not compile. Displays as cel-go does:
/// `ERROR: <input>:1:5: message` followed by the source line and a caret.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileError {
    /// The issues, sorted by position, at most [`MAX_ISSUES`].
    pub issues: Vec<Issue>,
    /// Issues found beyond [`MAX_ISSUES`], which are counted but not shown (cel-go's
    /// `maxErrorsToReport`).
    pub truncated: usize,
    source_lines: Vec<String>,
}

/// The most issues one compile error shows, as cel-go's default `maxErrorsToReport`.
pub const MAX_ISSUES: usize = 100;

impl CompileError {
    /// An error at byte `offset` of `source`.
    pub fn at(source: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_col(source, offset);
        CompileError {
            issues: vec![Issue {
                line,
                column,
                message: message.into(),
            }],
            truncated: 0,
            source_lines: snippets(source),
        }
    }

    /// Several issues, shown as cel-go shows them: sorted by position (a stable sort, so
    /// issues at one position keep the order they were found in), at most [`MAX_ISSUES`].
    pub fn from_issues(source: &str, mut issues: Vec<Issue>) -> Self {
        issues.sort_by_key(|i| (i.line, i.column));
        let truncated = issues.len().saturating_sub(MAX_ISSUES);
        issues.truncate(MAX_ISSUES);
        CompileError {
            issues,
            truncated,
            source_lines: snippets(source),
        }
    }

    /// An error that belongs to no position (for example the expression is too long).
    pub fn general(source: &str, message: impl Into<String>) -> Self {
        CompileError {
            issues: vec![Issue {
                line: 0,
                column: 0,
                message: message.into(),
            }],
            truncated: 0,
            source_lines: snippets(source),
        }
    }

    /// The first message, without position.
    pub fn message(&self) -> &str {
        self.issues.first().map_or("", |i| i.message.as_str())
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if issue.line == 0 {
                // cel-go's `NoLocation` (line -1, column -1), shown with its column + 1.
                write!(f, "ERROR: <input>:-1:0: {}", issue.message)?;
                continue;
            }
            write!(
                f,
                "ERROR: <input>:{}:{}: {}",
                issue.line, issue.column, issue.message
            )?;
            if let Some(text) = self.source_lines.get(issue.line - 1) {
                if text.len() <= MAX_SNIPPET_BYTES {
                    write!(f, "\n | {}", text.replace('\t', " "))?;
                    write!(
                        f,
                        "\n | {}",
                        indicator(text, issue.column.saturating_sub(1))
                    )?;
                }
            }
        }
        if self.truncated > 0 {
            write!(f, "\n{} more errors were truncated", self.truncated)?;
        }
        Ok(())
    }
}

/// The lines an error may quote, as cel-go's `Source.Snippet` cuts them (common/source.go):
/// split at `\n` only, so a `\r` stays and the empty line after a final line break is a line
/// (an error at the end of `a +\n` quotes it, blank); an empty source has none.
fn snippets(source: &str) -> Vec<String> {
    if source.is_empty() {
        return Vec::new();
    }
    source.split('\n').map(str::to_string).collect()
}

/// The line under a snippet that points at column `col` (0-based, in characters): one dot per
/// character before it and a caret, each full-width (`．`, `＾`) under a multi-byte character
/// so that the caret stays under its character in a terminal, as cel-go draws it.
fn indicator(line: &str, col: usize) -> String {
    let mut out = String::with_capacity(col + 3);
    let mut chars = line.chars();
    for c in chars.by_ref().take(col) {
        out.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
    }
    let at_wide = chars.next().is_some_and(|c| c.len_utf8() > 1);
    out.push(if at_wide { '\u{ff3e}' } else { '^' });
    out
}

/// cel-go's `maxSnippetLength`: a longer source line (in bytes) is not echoed under the error.
const MAX_SNIPPET_BYTES: usize = 16_384;

impl std::error::Error for CompileError {}

/// An issue at byte `offset` of `source`.
pub fn issue_at(source: &str, offset: usize, message: impl Into<String>) -> Issue {
    let (line, column) = line_col(source, offset);
    Issue {
        line,
        column,
        message: message.into(),
    }
}

/// 1-based line and character column of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// An evaluation error. `Cancelled` stops the whole evaluation: it is never absorbed by `&&`,
/// `||` or a comprehension, exactly as cel-go's cancellation panic.
///
/// `repr(u8)` keeps the error 32 bytes with its tag apart from the message: a 24-byte error
/// (the cancellation packed into the `String`'s niche) lets `Result<Value, EvalError>` share
/// `Value`'s tag byte, and every `?` on an evaluation result then copied the value's bytes
/// 1..32 as unaligned halves that stall on store forwarding: evaluation ran up to 1.6 times
/// slower. With the tag apart the result is 40 bytes and the value moves as aligned words
/// (`results_keep_their_tag_apart_from_the_value` checks the layout).
///
/// Exhaustive on purpose: an error is a CEL error value or a stop, and a new kind of stop is
/// a new [`CancelReason`].
#[derive(Debug, Clone, PartialEq)]
#[repr(u8)]
pub enum EvalError {
    /// An ordinary CEL error value, with cel-go's message.
    Value(String),
    /// The evaluation was stopped: by its cost limit, its deadline or its memory ceiling.
    Cancelled(CancelReason),
}

/// Why an evaluation was stopped. Each has its own message, so that a log or a denial says
/// which limit was hit, and [`CancelReason::label`] names it for metrics.
///
/// Exhaustive on purpose: a new limit must be given its own error kind and metrics label by
/// every caller that maps these (the admission engine does), which a wildcard arm would hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelReason {
    /// The cost limit (cel-go's `CostLimit`): `operation cancelled: actual cost limit exceeded`.
    CostLimit,
    /// The request's deadline passed: cel-go's interrupt, `operation interrupted`.
    Deadline,
    /// The evaluation built more bytes than its memory ceiling allows (celgate's own limit,
    /// cel-go has none): `operation cancelled: memory limit exceeded`.
    MemoryLimit,
}

impl CancelReason {
    /// The error message, cel-go's wording for the two limits cel-go has.
    pub fn message(self) -> &'static str {
        match self {
            CancelReason::CostLimit => "operation cancelled: actual cost limit exceeded",
            CancelReason::Deadline => "operation interrupted",
            CancelReason::MemoryLimit => "operation cancelled: memory limit exceeded",
        }
    }

    /// A short stable name for metrics labels: `cost_limit`, `deadline`, `memory_limit`.
    pub fn label(self) -> &'static str {
        match self {
            CancelReason::CostLimit => "cost_limit",
            CancelReason::Deadline => "deadline",
            CancelReason::MemoryLimit => "memory_limit",
        }
    }
}

impl EvalError {
    /// An error value with message `msg`.
    pub fn new(msg: impl Into<String>) -> Self {
        EvalError::Value(msg.into())
    }

    /// cel-go's `no such key: <key>`.
    pub fn no_such_key(key: impl fmt::Display) -> Self {
        EvalError::Value(format!("no such key: {key}"))
    }

    /// cel-go's `no such overload`.
    pub fn no_such_overload() -> Self {
        EvalError::Value("no such overload".into())
    }

    /// cel-go's `integer overflow`.
    pub fn overflow() -> Self {
        EvalError::Value("integer overflow".into())
    }

    /// The cancellation of an evaluation over its cost limit.
    pub fn cost_limit() -> Self {
        EvalError::Cancelled(CancelReason::CostLimit)
    }

    /// The cancellation of an evaluation past its deadline.
    pub fn deadline() -> Self {
        EvalError::Cancelled(CancelReason::Deadline)
    }

    /// The cancellation of an evaluation over its memory ceiling.
    pub fn memory_limit() -> Self {
        EvalError::Cancelled(CancelReason::MemoryLimit)
    }

    /// The message, cel-go's wording.
    pub fn message(&self) -> &str {
        match self {
            EvalError::Value(m) => m,
            EvalError::Cancelled(r) => r.message(),
        }
    }

    /// Whether the evaluation was stopped by a limit (see [`EvalError::Cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, EvalError::Cancelled(_))
    }

    /// Why the evaluation was stopped, for a cancellation; `None` for an ordinary error.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        match self {
            EvalError::Cancelled(r) => Some(*r),
            EvalError::Value(_) => None,
        }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for EvalError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_line_and_character() {
        assert_eq!(line_col("ab\ncdé f", 9), (2, 6));
        let e = CompileError::at("a +", 3, "Syntax error: mismatched input '<EOF>'");
        assert_eq!(
            e.to_string(),
            "ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>'\n | a +\n | ...^"
        );
    }

    #[test]
    fn snippets_are_drawn_as_cel_go_draws_them() {
        // Tabs show as spaces; a caret under a multi-byte character is full-width.
        let e = CompileError::at("a\t+ é", 4, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:1:5: m\n | a + é\n | ....＾");
        // A line longer than 16 KiB is not echoed.
        let long = "a".repeat(MAX_SNIPPET_BYTES + 1);
        assert_eq!(
            CompileError::at(&long, 3, "m").to_string(),
            "ERROR: <input>:1:4: m"
        );
        // Issues are sorted by position, at most MAX_ISSUES shown.
        let issues: Vec<Issue> = (0..MAX_ISSUES + 2)
            .rev()
            .map(|i| issue_at(&long, i, "m"))
            .collect();
        let e = CompileError::from_issues(&long, issues);
        assert_eq!(e.issues.len(), MAX_ISSUES);
        assert_eq!(e.issues[0].column, 1);
        assert!(e.to_string().ends_with("\n2 more errors were truncated"));
    }

    /// cel-go's `Error.ToDisplayString` (common/error.go) quotes `Source.Snippet(line)`,
    /// which exists for the blank line after a final line break, and draws one dot per
    /// character of the snippet before the column: none past the snippet's end.
    #[test]
    fn a_blank_or_whitespace_line_is_quoted_with_its_caret() {
        let e = CompileError::at("a +\n", 4, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:2:1: m\n | \n | ^");
        let e = CompileError::at("a +\n  \n", 7, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:3:1: m\n | \n | ^");
        let e = CompileError::at("a +\n\t ", 6, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:2:3: m\n |   \n | ..^");
        // Only `\n` ends a line: a `\r` before it stays in the snippet.
        let e = CompileError::at("a\r\nb", 3, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:2:1: m\n | b\n | ^");
        let e = CompileError::at("a\r\nb", 0, "m");
        assert_eq!(e.to_string(), "ERROR: <input>:1:1: m\n | a\r\n | ^");
    }

    #[test]
    fn results_keep_their_tag_apart_from_the_value() {
        use super::super::value::Value;
        assert_eq!(std::mem::size_of::<Value<'static>>(), 32);
        assert_eq!(std::mem::size_of::<EvalError>(), 32);
        // 40 bytes: a tag word, then the value at offset 8 (not the value's own tag byte
        // doubling as the result's).
        assert_eq!(std::mem::size_of::<Result<Value<'static>, EvalError>>(), 40);
    }

    #[test]
    fn cancellations_say_which_limit() {
        for (e, text, label) in [
            (
                EvalError::cost_limit(),
                "operation cancelled: actual cost limit exceeded",
                "cost_limit",
            ),
            (EvalError::deadline(), "operation interrupted", "deadline"),
            (
                EvalError::memory_limit(),
                "operation cancelled: memory limit exceeded",
                "memory_limit",
            ),
        ] {
            assert!(e.is_cancelled());
            assert_eq!(e.to_string(), text);
            assert_eq!(e.cancel_reason().map(CancelReason::label), Some(label));
        }
        assert_eq!(EvalError::new("x").cancel_reason(), None);
    }
}
