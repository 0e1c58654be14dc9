//! The token types of cel-go's generated CEL parser and how ANTLR's error strategy words them.
//!
//! cel-go (v0.22.0, `parser/gen/CEL.tokens`) numbers the tokens of `CEL.g4`; ANTLR's
//! `DefaultErrorStrategy` (antlr4-go v4.13.0, `error_strategy.go`) names a set of expected
//! tokens by those numbers in ascending order (`IntervalSet.StringVerbose`): the literal name
//! (`'['`) where the token has one, else the symbolic one (`IDENTIFIER`), `<EOF>` first, and
//! braces only around more than one. The parser keeps its expected and follow sets as
//! [`TokSet`]s so that every message lists exactly what ANTLR lists.

use super::lexer::Tok;

/// A set of ANTLR token types: bit 0 is `EOF` (type -1), bit `n` is type `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TokSet(u64);

/// ANTLR's names of the token types 1..=36 (`CEL.tokens`).
const NAMES: [&str; 37] = [
    "<EOF>",
    "'=='",
    "'!='",
    "'in'",
    "'<'",
    "'<='",
    "'>='",
    "'>'",
    "'&&'",
    "'||'",
    "'['",
    "']'",
    "'{'",
    "'}'",
    "'('",
    "')'",
    "'.'",
    "','",
    "'-'",
    "'!'",
    "'?'",
    "':'",
    "'+'",
    "'*'",
    "'/'",
    "'%'",
    "'true'",
    "'false'",
    "'null'",
    "WHITESPACE",
    "COMMENT",
    "NUM_FLOAT",
    "NUM_INT",
    "NUM_UINT",
    "STRING",
    "BYTES",
    "IDENTIFIER",
];

/// Token type numbers (`CEL.tokens`); `EOF` is ANTLR's -1, kept as bit 0.
pub(crate) mod ty {
    pub const EOF: u32 = 0;
    pub const EQ: u32 = 1;
    pub const NE: u32 = 2;
    pub const IN: u32 = 3;
    pub const LT: u32 = 4;
    pub const LE: u32 = 5;
    pub const GE: u32 = 6;
    pub const GT: u32 = 7;
    pub const AND: u32 = 8;
    pub const OR: u32 = 9;
    pub const LBRACKET: u32 = 10;
    pub const RBRACKET: u32 = 11;
    pub const LBRACE: u32 = 12;
    pub const RBRACE: u32 = 13;
    pub const LPAREN: u32 = 14;
    pub const RPAREN: u32 = 15;
    pub const DOT: u32 = 16;
    pub const COMMA: u32 = 17;
    pub const MINUS: u32 = 18;
    pub const NOT: u32 = 19;
    pub const QUESTION: u32 = 20;
    pub const COLON: u32 = 21;
    pub const PLUS: u32 = 22;
    pub const STAR: u32 = 23;
    pub const SLASH: u32 = 24;
    pub const PERCENT: u32 = 25;
    pub const TRUE: u32 = 26;
    pub const FALSE: u32 = 27;
    pub const NULL: u32 = 28;
    pub const NUM_FLOAT: u32 = 31;
    pub const NUM_INT: u32 = 32;
    pub const NUM_UINT: u32 = 33;
    pub const STRING: u32 = 34;
    pub const BYTES: u32 = 35;
    pub const IDENTIFIER: u32 = 36;
}

impl TokSet {
    /// The set of the given types.
    pub(crate) const fn of(types: &[u32]) -> TokSet {
        let mut bits = 0u64;
        let mut i = 0;
        while i < types.len() {
            bits |= 1 << types[i];
            i += 1;
        }
        TokSet(bits)
    }

    pub(crate) fn has(self, t: u32) -> bool {
        self.0 & (1 << t) != 0
    }

    pub(crate) const fn union(self, other: TokSet) -> TokSet {
        TokSet(self.0 | other.0)
    }

    pub(crate) fn with(self, t: u32) -> TokSet {
        TokSet(self.0 | 1 << t)
    }

    /// How ANTLR's `IntervalSet.StringVerbose` writes the set.
    pub(crate) fn describe(self) -> String {
        let names: Vec<&str> = (0..NAMES.len())
            .filter(|&t| self.has(t as u32))
            .map(|t| NAMES[t])
            .collect();
        match names.as_slice() {
            [one] => (*one).to_string(),
            _ => format!("{{{}}}", names.join(", ")),
        }
    }
}

use ty::*;

/// What can start a `unary` (cel-go's `FIRST(expr)`).
pub(crate) const EXPR_FIRST: TokSet = TokSet::of(&[
    LBRACKET, LBRACE, LPAREN, DOT, MINUS, NOT, TRUE, FALSE, NULL, NUM_FLOAT, NUM_INT, NUM_UINT,
    STRING, BYTES, IDENTIFIER,
]);
/// What can start a `member` (and a `primary`): no `!`, but the `-` a number literal may
/// have (`literal: sign=MINUS? tok=NUM_INT | ...` in v0.22.0's grammar).
pub(crate) const MEMBER_FIRST: TokSet = TokSet::of(&[
    LBRACKET, LBRACE, LPAREN, DOT, MINUS, TRUE, FALSE, NULL, NUM_FLOAT, NUM_INT, NUM_UINT, STRING,
    BYTES, IDENTIFIER,
]);
/// The operators of `relation`.
pub(crate) const RELATION_OPS: TokSet = TokSet::of(&[EQ, NE, IN, LT, LE, GE, GT]);
/// The operators of `calc`.
pub(crate) const CALC_OPS: TokSet = TokSet::of(&[MINUS, PLUS, STAR, SLASH, PERCENT]);

/// The ANTLR type of a token of celgate's lexer. Reserved words are `IDENTIFIER`s to ANTLR
/// (cel-go refuses them later, in its visitor).
pub(crate) fn type_of(t: &Tok) -> u32 {
    match t {
        Tok::Ident(_) | Tok::QuotedIdent(_) | Tok::Reserved(_) => IDENTIFIER,
        Tok::Int(_) | Tok::IntOverflow => NUM_INT,
        Tok::Uint(_) | Tok::UintOverflow => NUM_UINT,
        Tok::Double(_) => NUM_FLOAT,
        Tok::Str(_) => STRING,
        Tok::Bytes(_) => BYTES,
        Tok::True => TRUE,
        Tok::False => FALSE,
        Tok::Null => NULL,
        Tok::In => IN,
        Tok::LParen => LPAREN,
        Tok::RParen => RPAREN,
        Tok::LBracket => LBRACKET,
        Tok::RBracket => RBRACKET,
        Tok::LBrace => LBRACE,
        Tok::RBrace => RBRACE,
        Tok::Dot => DOT,
        Tok::Comma => COMMA,
        Tok::Colon => COLON,
        Tok::Question => QUESTION,
        Tok::Not => NOT,
        Tok::Minus => MINUS,
        Tok::Plus => PLUS,
        Tok::Star => STAR,
        Tok::Slash => SLASH,
        Tok::Percent => PERCENT,
        Tok::EqEq => EQ,
        Tok::NotEq => NE,
        Tok::Lt => LT,
        Tok::Le => LE,
        Tok::Gt => GT,
        Tok::Ge => GE,
        Tok::AndAnd => AND,
        Tok::OrOr => OR,
        Tok::Eof => EOF,
    }
}

/// ANTLR's `escapeWSAndQuote`: tabs and line breaks written as `\t`, `\n`, `\r`, in quotes.
pub(crate) fn quote(text: &str) -> String {
    let escaped = text
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r");
    format!("'{escaped}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// antlr4-go `IntervalSet.toTokenString`: ascending types, braces only around several.
    #[test]
    fn sets_are_named_as_antlr_names_them() {
        assert_eq!(TokSet::of(&[RPAREN]).describe(), "')'");
        assert_eq!(TokSet::of(&[COMMA, RBRACE]).describe(), "{'}', ','}");
        assert_eq!(TokSet::of(&[EOF]).describe(), "<EOF>");
        assert_eq!(
            EXPR_FIRST.describe(),
            "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
        );
        assert_eq!(quote("a\n\tb"), "'a\\n\\tb'");
    }
}
