//! The CEL lexer: source text to tokens, with byte offsets for error positions.
//!
//! Follows the lexical grammar of cel-spec (`CEL.g4`): decimal and hex integers with an
//! optional `u` suffix, doubles, the four string quotings with raw (`r`) and bytes (`b`)
//! prefixes and every escape of the spec, `//` comments, and reserved words.
//!
//! Public for tools that scan an expression without compiling it (the CRD cost estimator
//! finds the fields a rule names; a policy checker refuses reserved words as names).

use super::error::SyntaxError;

/// A token and where it starts and ends in the source (byte offsets).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// What was read.
    pub kind: Tok,
    /// The first byte.
    pub start: usize,
    /// The byte after the last.
    pub end: usize,
}

/// The kinds of token. The punctuation and keyword variants are the token their name says
/// (`LParen` is `(`, `EqEq` is `==`, `AndAnd` is `&&`, ...); a literal holds its value with
/// escapes resolved.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name.
    Ident(String),
    /// A backtick-escaped field name (`` a.`b-c` ``), only valid after a dot.
    QuotedIdent(String),
    Int(u64),
    /// An integer literal too large for `u64`: only an error if used.
    IntOverflow,
    /// A `u`-suffixed literal beyond `u64`.
    UintOverflow,
    Uint(u64),
    Double(f64),
    Str(String),
    Bytes(Vec<u8>),
    True,
    False,
    Null,
    In,
    /// A reserved word that may not be used as an identifier.
    Reserved(&'static str),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Dot,
    Comma,
    Colon,
    Question,
    Not,
    Minus,
    Plus,
    Star,
    Slash,
    Percent,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::QuotedIdent(s) => format!("'`{s}`'"),
            Tok::Int(_) | Tok::IntOverflow | Tok::UintOverflow | Tok::Uint(_) | Tok::Double(_) => {
                "number".into()
            }
            Tok::Str(_) => "string".into(),
            Tok::Bytes(_) => "bytes".into(),
            Tok::True => "'true'".into(),
            Tok::False => "'false'".into(),
            Tok::Null => "'null'".into(),
            Tok::In => "'in'".into(),
            Tok::Reserved(w) => format!("reserved identifier '{w}'"),
            Tok::Eof => "<EOF>".into(),
            other => format!("'{}'", other.punct()),
        }
    }

    fn punct(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Dot => ".",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Question => "?",
            Tok::Not => "!",
            Tok::Minus => "-",
            Tok::Plus => "+",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            _ => "?",
        }
    }
}

/// Words CEL reserves: they cannot name a variable or function, but may follow a dot.
const RESERVED: [&str; 16] = [
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
];

/// Whether `word` is one of CEL's reserved words (`as`, `break`, `const`, ..., `while`),
/// which may not name a variable or a field outside backticks.
pub fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word) || word == "while"
}

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub fn tokenize(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let (tokens, mut unrecognized) = tokenize_recovering(src, true)?;
    match unrecognized.is_empty() {
        true => Ok(tokens),
        false => Err(unrecognized.remove(0)),
    }
}

/// The tokens of `src`, and the text ANTLR's lexer could not recognize: as it does, each
/// such error is reported and lexing goes on after the character where matching failed.
/// Other lexical errors (a malformed number) stop at once. `escaped_idents`: whether a
/// backquoted name may follow a dot (cel-go v0.23's grammar); without, a backquote is
/// unrecognized text, as in cel-go v0.22.0's `CEL.g4`.
pub(crate) fn tokenize_recovering(
    src: &str,
    escaped_idents: bool,
) -> Result<(Vec<Token>, Vec<SyntaxError>), SyntaxError> {
    let mut lx = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        resume: None,
        after_dot: false,
    };
    let mut out = Vec::with_capacity(src.len() / 3 + 1);
    let mut unrecognized = Vec::new();
    loop {
        lx.skip_space_and_comments();
        let start = lx.pos;
        if start >= lx.bytes.len() {
            out.push(Token {
                kind: Tok::Eof,
                start,
                end: start,
            });
            return Ok((out, unrecognized));
        }
        lx.after_dot = escaped_idents && out.last().is_some_and(|t: &Token| t.kind == Tok::Dot);
        match lx.next_token() {
            Ok(kind) => out.push(Token {
                kind,
                start,
                end: lx.pos,
            }),
            Err(e) => match lx.resume.take() {
                Some(resume) => {
                    unrecognized.push(e);
                    lx.pos = resume;
                }
                None => return Err(e),
            },
        }
    }
}

struct Lexer<'s> {
    src: &'s str,
    bytes: &'s [u8],
    pos: usize,
    /// Set with a token recognition error: where lexing goes on.
    resume: Option<usize>,
    /// Whether the previous token is a `.` (a backquoted name may only follow one).
    after_dot: bool,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> u8 {
        self.bytes.get(self.pos + ahead).copied().unwrap_or(0)
    }

    /// ANTLR's token recognition error for a token starting at `start` that failed to match
    /// at the character at `fail`: the text up to and including that character, after which
    /// lexing resumes.
    fn unrecognized(&mut self, start: usize, fail: usize) -> SyntaxError {
        let len = self.bytes.len();
        let end = if fail >= len {
            len
        } else {
            fail + self
                .src
                .get(fail..)
                .and_then(|r| r.chars().next())
                .map_or(1, char::len_utf8)
        };
        self.resume = Some(end);
        let text = self.src.get(start..end).unwrap_or("");
        SyntaxError {
            offset: start,
            message: format!("Syntax error: token recognition error at: '{text}'"),
        }
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> SyntaxError {
        SyntaxError {
            offset: at,
            message: msg.into(),
        }
    }

    fn skip_space_and_comments(&mut self) {
        loop {
            match self.peek(0) {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0c => self.pos += 1,
                b'/' if self.peek(1) == b'/' => {
                    while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn next_token(&mut self) -> Result<Tok, SyntaxError> {
        let c = self.peek(0);
        let two = |lx: &mut Self, t: Tok| {
            lx.pos += 2;
            Ok(t)
        };
        let one = |lx: &mut Self, t: Tok| {
            lx.pos += 1;
            Ok(t)
        };
        match c {
            b'(' => one(self, Tok::LParen),
            b')' => one(self, Tok::RParen),
            b'[' => one(self, Tok::LBracket),
            b']' => one(self, Tok::RBracket),
            b'{' => one(self, Tok::LBrace),
            b'}' => one(self, Tok::RBrace),
            b',' => one(self, Tok::Comma),
            b':' => one(self, Tok::Colon),
            b'?' => one(self, Tok::Question),
            b'+' => one(self, Tok::Plus),
            b'-' => one(self, Tok::Minus),
            b'*' => one(self, Tok::Star),
            b'/' => one(self, Tok::Slash),
            b'%' => one(self, Tok::Percent),
            b'=' if self.peek(1) == b'=' => two(self, Tok::EqEq),
            b'!' if self.peek(1) == b'=' => two(self, Tok::NotEq),
            b'!' => one(self, Tok::Not),
            b'<' if self.peek(1) == b'=' => two(self, Tok::Le),
            b'<' => one(self, Tok::Lt),
            b'>' if self.peek(1) == b'=' => two(self, Tok::Ge),
            b'>' => one(self, Tok::Gt),
            b'&' if self.peek(1) == b'&' => two(self, Tok::AndAnd),
            b'|' if self.peek(1) == b'|' => two(self, Tok::OrOr),
            // The first of `&&`, `||`, `==` alone fails at the character after it.
            b'&' | b'|' | b'=' => Err(self.unrecognized(self.pos, self.pos + 1)),
            b'.' if self.peek(1).is_ascii_digit() => self.number(),
            b'.' => one(self, Tok::Dot),
            b'0'..=b'9' => self.number(),
            b'"' | b'\'' => self.string(false, false, self.pos),
            b'`' if self.after_dot => self.quoted_ident(),
            b'r' | b'R' | b'b' | b'B' => self.prefixed_or_ident(),
            c if c == b'_' || c.is_ascii_alphabetic() => Ok(self.ident()),
            _ => Err(self.unrecognized(self.pos, self.pos)),
        }
    }

    /// `` `name` `` with letters, digits, `_`, `.`, `-`, `/` and spaces, as cel-go's
    /// escaped identifiers.
    fn quoted_ident(&mut self) -> Result<Tok, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let body_start = self.pos;
        while matches!(self.peek(0), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'/' | b' ')
        {
            self.pos += 1;
        }
        if self.peek(0) != b'`' || self.pos == body_start {
            let fail = self.pos;
            return Err(self.unrecognized(start, fail));
        }
        let name = self.src[body_start..self.pos].to_string();
        self.pos += 1;
        Ok(Tok::QuotedIdent(name))
    }

    fn ident(&mut self) -> Tok {
        let start = self.pos;
        while matches!(self.peek(0), b'_' | b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9') {
            self.pos += 1;
        }
        let word = &self.src[start..self.pos];
        match word {
            "true" => Tok::True,
            "false" => Tok::False,
            "null" => Tok::Null,
            "in" => Tok::In,
            w => match RESERVED.iter().find(|r| **r == w) {
                Some(r) => Tok::Reserved(r),
                None if w == "while" => Tok::Reserved("while"),
                None => Tok::Ident(w.to_string()),
            },
        }
    }

    /// `r"..."`, `b'...'`, `br"..."` and friends (cel-go v0.22.0's CEL.g4: `BYTES : ('b' |
    /// 'B') STRING`, and a STRING may be `RAW`: `rb'...'` is a name and a string), or an
    /// identifier starting with one of those letters. As ANTLR's lexer falls back to the
    /// longest token it matched, a prefixed literal that fails is the identifier of its
    /// prefix letters, and the failure is the quote's.
    fn prefixed_or_ident(&mut self) -> Result<Tok, SyntaxError> {
        let (a, b, c) = (self.peek(0), self.peek(1), self.peek(2));
        let is_quote = |q: u8| q == b'"' || q == b'\'';
        let raw = |x: u8| x == b'r' || x == b'R';
        let byt = |x: u8| x == b'b' || x == b'B';
        let token = self.pos;
        let literal = if is_quote(b) {
            self.pos += 1;
            self.string(raw(a), byt(a), token)
        } else if byt(a) && raw(b) && is_quote(c) {
            self.pos += 2;
            self.string(true, true, token)
        } else {
            return Ok(self.ident());
        };
        if literal.is_err() && self.resume.take().is_some() {
            self.pos = token;
            return Ok(self.ident());
        }
        literal
    }

    fn number(&mut self) -> Result<Tok, SyntaxError> {
        let start = self.pos;
        if self.peek(0) == b'0' && matches!(self.peek(1), b'x' | b'X') {
            self.pos += 2;
            let digits_start = self.pos;
            while self.peek(0).is_ascii_hexdigit() {
                self.pos += 1;
            }
            if self.pos == digits_start {
                // ANTLR's lexer takes the `0` alone; the `x...` after it is an identifier
                // the parser then finds extraneous.
                self.pos = start + 1;
                return Ok(self.int_suffix(Some(0)));
            }
            let text = &self.src[digits_start..self.pos];
            let value = u64::from_str_radix(text, 16).ok();
            return Ok(self.int_suffix(value));
        }
        let mut is_float = false;
        while self.peek(0).is_ascii_digit() {
            self.pos += 1;
        }
        if self.peek(0) == b'.' && self.peek(1).is_ascii_digit() {
            is_float = true;
            self.pos += 1;
            while self.peek(0).is_ascii_digit() {
                self.pos += 1;
            }
        }
        if matches!(self.peek(0), b'e' | b'E') {
            let save = self.pos;
            self.pos += 1;
            if matches!(self.peek(0), b'+' | b'-') {
                self.pos += 1;
            }
            if self.peek(0).is_ascii_digit() {
                is_float = true;
                while self.peek(0).is_ascii_digit() {
                    self.pos += 1;
                }
            } else {
                self.pos = save;
            }
        }
        let text = &self.src[start..self.pos];
        if is_float {
            return text.parse::<f64>().map(Tok::Double).map_err(|_| {
                self.err(
                    start,
                    format!("Syntax error: invalid double literal '{text}'"),
                )
            });
        }
        Ok(self.int_suffix(text.parse::<u64>().ok()))
    }

    fn int_suffix(&mut self, value: Option<u64>) -> Tok {
        if matches!(self.peek(0), b'u' | b'U') {
            self.pos += 1;
            return value.map_or(Tok::UintOverflow, Tok::Uint);
        }
        value.map_or(Tok::IntOverflow, Tok::Int)
    }

    /// A quoted literal; `token` is where its token starts (before any `b`/`r` prefix).
    fn string(&mut self, raw: bool, bytes: bool, token: usize) -> Result<Tok, SyntaxError> {
        let start = self.pos;
        let quote = self.peek(0);
        let triple = self.peek(1) == quote && self.peek(2) == quote;
        self.pos += if triple { 3 } else { 1 };
        let mut buf: Vec<u8> = Vec::new();
        loop {
            if self.pos >= self.bytes.len() {
                if triple {
                    // ANTLR falls back to the longest token that matched: the empty `''`.
                    self.pos = start + 2;
                    return Ok(empty(bytes));
                }
                let end = self.bytes.len();
                return Err(self.unrecognized(token, end));
            }
            let c = self.bytes[self.pos];
            if triple {
                if c == quote && self.peek(1) == quote && self.peek(2) == quote {
                    self.pos += 3;
                    break;
                }
            } else if c == quote {
                self.pos += 1;
                break;
            } else if c == b'\n' || c == b'\r' {
                let fail = self.pos;
                return Err(self.unrecognized(token, fail));
            }
            if c == b'\\' && !raw {
                if let Err(e) = self.escape(&mut buf, bytes, token) {
                    if triple && self.resume.take().is_some() {
                        // As at the end of input: the longest token matched is the empty `''`.
                        self.pos = start + 2;
                        return Ok(empty(bytes));
                    }
                    return Err(e);
                }
                continue;
            }
            // In a raw string a backslash is a character like any other: the quote after it
            // ends the string (`RAW '\'' ~('\''|'\n'|'\r')* '\''` in cel-go v0.22.0's CEL.g4).
            buf.push(c);
            self.pos += 1;
        }
        if bytes {
            return Ok(Tok::Bytes(buf));
        }
        String::from_utf8(buf)
            .map(Tok::Str)
            .map_err(|_| self.err(start, "Syntax error: invalid UTF-8 in string literal"))
    }

    /// One escape sequence. One the grammar accepts but that names no character (a
    /// surrogate, `\u` in a bytes literal) fails as cel-go's unquoting does: `unable to
    /// unescape string`, at the literal's token.
    fn escape(&mut self, buf: &mut Vec<u8>, bytes: bool, token: usize) -> Result<(), SyntaxError> {
        let at = self.pos;
        self.pos += 1;
        let c = self.peek(0);
        self.pos += 1;
        let simple = match c {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' => Some(b'\\'),
            b'\'' => Some(b'\''),
            b'"' => Some(b'"'),
            b'`' => Some(b'`'),
            b'?' => Some(b'?'),
            _ => None,
        };
        if let Some(b) = simple {
            buf.push(b);
            return Ok(());
        }
        // A malformed escape fails to match at its first wrong character.
        let bad = |lx: &mut Self, fail: usize| lx.unrecognized(token, fail);
        let unquote = |lx: &Self| lx.err(token, "unable to unescape string");
        match c {
            b'x' | b'X' => {
                let Some(v) = self.hex_digits(2) else {
                    let fail = self.first_non_hex();
                    return Err(bad(self, fail));
                };
                push_code(buf, v, bytes).ok_or_else(|| unquote(self))
            }
            b'u' | b'U' => {
                let Some(v) = self.hex_digits(if c == b'u' { 4 } else { 8 }) else {
                    let fail = self.first_non_hex();
                    return Err(bad(self, fail));
                };
                if bytes {
                    return Err(unquote(self));
                }
                push_code(buf, v, false).ok_or_else(|| unquote(self))
            }
            b'0'..=b'3' => {
                let d1 = u32::from(c - b'0');
                let (d2, d3) = (self.peek(0), self.peek(1));
                if !(b'0'..=b'7').contains(&d2) {
                    let fail = self.pos;
                    return Err(bad(self, fail));
                }
                if !(b'0'..=b'7').contains(&d3) {
                    let fail = self.pos + 1;
                    return Err(bad(self, fail));
                }
                self.pos += 2;
                let v = d1 * 64 + u32::from(d2 - b'0') * 8 + u32::from(d3 - b'0');
                push_code(buf, v, bytes).ok_or_else(|| unquote(self))
            }
            _ => Err(bad(self, at + 1)),
        }
    }

    /// Where a run of hex digits starting here ends.
    fn first_non_hex(&self) -> usize {
        let mut i = self.pos;
        while self.bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
            i += 1;
        }
        i
    }

    fn hex_digits(&mut self, n: usize) -> Option<u32> {
        let text = self.src.get(self.pos..self.pos + n)?;
        let v = u32::from_str_radix(text, 16).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += n;
        Some(v)
    }
}

/// The empty string or bytes literal.
fn empty(bytes: bool) -> Tok {
    if bytes {
        Tok::Bytes(Vec::new())
    } else {
        Tok::Str(String::new())
    }
}

/// In a bytes literal `\xHH` and octal escapes are raw bytes; in a string they are code points.
fn push_code(buf: &mut Vec<u8>, v: u32, bytes: bool) -> Option<()> {
    if bytes {
        buf.push(u8::try_from(v).ok()?);
        return Some(());
    }
    if v > u32::from(char::MAX) {
        return None;
    }
    // A surrogate half is no character: Go's utf8.EncodeRune, as cel-go uses it, writes
    // U+FFFD for it.
    let ch = char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER);
    let mut tmp = [0u8; 4];
    buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        tokenize(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("1 0x1F 2u 1.5 1e3 .5"),
            vec![
                Tok::Int(1),
                Tok::Int(31),
                Tok::Uint(2),
                Tok::Double(1.5),
                Tok::Double(1000.0),
                Tok::Double(0.5),
                Tok::Eof
            ]
        );
        assert_eq!(kinds("18446744073709551616")[0], Tok::IntOverflow);
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(
            kinds(r#"'a\n' "\x41\u00e9" r'\n' b'\xff' '''x'y'''"#),
            vec![
                Tok::Str("a\n".into()),
                Tok::Str("Aé".into()),
                Tok::Str("\\n".into()),
                Tok::Bytes(vec![0xff]),
                Tok::Str("x'y".into()),
                Tok::Eof
            ]
        );
        assert!(tokenize("'abc").is_err());
        // `rb` is a name before a string; `br` prefixes raw bytes (CEL.g4 `BYTES`).
        assert_eq!(
            kinds("rb'x' br'\\x'"),
            vec![
                Tok::Ident("rb".into()),
                Tok::Str("x".into()),
                Tok::Bytes(b"\\x".to_vec()),
                Tok::Eof
            ]
        );
        // A prefixed literal that fails is its prefix's name; the error is the quote's, and
        // lexing goes on after the character that failed (here: a string `' r'`).
        let lexed = |src: &str| {
            let (tokens, errors) = tokenize_recovering(src, true).unwrap();
            let tokens: Vec<Tok> = tokens.into_iter().map(|t| t.kind).collect();
            let errors: Vec<(usize, String)> =
                errors.into_iter().map(|e| (e.offset, e.message)).collect();
            (tokens, errors)
        };
        assert_eq!(
            lexed("b'\\q' r'a"),
            (
                vec![
                    Tok::Ident("b".into()),
                    Tok::Str(" r".into()),
                    Tok::Ident("a".into()),
                    Tok::Eof
                ],
                vec![(
                    1,
                    "Syntax error: token recognition error at: ''\\q'".to_string()
                )]
            )
        );
        assert_eq!(
            lexed("r'a"),
            (
                vec![Tok::Ident("r".into()), Tok::Eof],
                vec![(
                    1,
                    "Syntax error: token recognition error at: ''a'".to_string()
                )]
            )
        );
        // A triple-quoted literal with a bad escape is the empty `''` ANTLR matched first;
        // the error starts at its third quote. Then `b'''` is the empty `b''`, and its last quote
        // opens a string the end leaves open.
        assert_eq!(
            lexed("'''a\\qb'''"),
            (
                vec![Tok::Str(String::new()), Tok::Bytes(Vec::new()), Tok::Eof],
                vec![
                    (
                        2,
                        "Syntax error: token recognition error at: ''a\\q'".to_string()
                    ),
                    (
                        9,
                        "Syntax error: token recognition error at: '''".to_string()
                    )
                ]
            )
        );
        // A raw string ends at the quote after a backslash (cel-go v0.22.0 CEL.g4 `RAW`).
        assert_eq!(
            kinds(r"r'a\' + 'b'"),
            vec![
                Tok::Str("a\\".into()),
                Tok::Plus,
                Tok::Str("b".into()),
                Tok::Eof
            ]
        );
        assert!(tokenize(r"'\q'").is_err());
    }

    #[test]
    fn reserved_and_comments() {
        assert_eq!(
            kinds("in // comment\n if"),
            vec![Tok::In, Tok::Reserved("if"), Tok::Eof]
        );
    }
}
