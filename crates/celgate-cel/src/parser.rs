//! The CEL parser: tokens to [`Expr`], with cel-go's limits and macro expansion.
//!
//! celgate parses CEL itself rather than with the `cel` crate: that crate's ANTLR parser
//! recurses once per operator of a left-associative chain and per nesting level, and aborts
//! the process with a stack overflow on 60 nested parentheses or a 10,000-term `1+1+...` in a
//! debug build. Here left-associative chains are loops, nesting is counted, and a tree deeper
//! than [`MAX_DEPTH`] is refused before it is built, so no later pass (checker, planner,
//! evaluator, even `Drop`) can recurse without bound. Limits are cel-go's defaults: 100,000
//! code points and a recursion depth of 250.

use super::ast::{Comprehension, Expr, ExprKind, FieldInit, Literal, MacroKind, MapEntry, Span};
use super::error::{CompileError, SyntaxError};
use super::lexer::{tokenize_recovering, Tok, Token};

/// cel-go's text for a double literal Go cannot parse (out of range).
const INVALID_DOUBLE: &str = "invalid double literal";

/// cel-go's default `ExpressionSizeCodePointLimit`.
pub const MAX_CODE_POINTS: usize = 100_000;
/// cel-go's default `MaxRecursionDepth`: the deepest expression tree accepted.
pub const MAX_DEPTH: u32 = 250;

/// Parses `source`, expanding macros.
pub fn parse(source: &str) -> Result<Expr, CompileError> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(CompileError::general(
            source,
            format!(
                "expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
            ),
        ));
    }
    let (tokens, unrecognized) =
        tokenize_recovering(source).map_err(|e| CompileError::at(source, e.offset, e.message))?;
    let mut p = Parser {
        tokens,
        pos: 0,
        src: source,
        recovery: Vec::new(),
    };
    let result = p.expr(0).and_then(|(e, _)| {
        if p.peek() != &Tok::Eof {
            return Err(p.trailing());
        }
        Ok(e)
    });
    // Text the lexer could not recognize is reported with the parser's error on the tokens
    // around it, as ANTLR reports both; so is what ANTLR's error recovery reports.
    if !unrecognized.is_empty() || !p.recovery.is_empty() {
        let issues = unrecognized
            .into_iter()
            .chain(p.recovery)
            .chain(result.err())
            .flat_map(|e| located(source, e).issues)
            .collect();
        return Err(CompileError::from_issues(source, issues));
    }
    result.map_err(|e| {
        let mut err = located(source, e);
        // ANTLR places the end of an empty input at column -1, which cel-go shows as 0.
        if source.is_empty() {
            if let Some(issue) = err.issues.first_mut() {
                issue.column = 0;
            }
        }
        err
    })
}

type PResult = Result<(Expr, u32), SyntaxError>;

/// The offset of a syntax error that belongs to no place in the source.
const NO_LOCATION: usize = usize::MAX;

/// A syntax error as an issue (at no location for [`NO_LOCATION`]).
fn located(source: &str, e: SyntaxError) -> CompileError {
    if e.offset == NO_LOCATION {
        return CompileError::general(source, e.message);
    }
    CompileError::at(source, e.offset, e.message)
}

/// The terminals that can start an expression, as ANTLR lists them when one is missing.
const EXPR_START: &str = "'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER";

struct Parser<'s> {
    /// The source, to quote tokens in messages as ANTLR does (by their text).
    src: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    /// Errors ANTLR's error recovery would report besides the parser's own error.
    recovery: Vec<SyntaxError>,
}

/// cel-go's `ErrorRecoveryLookaheadTokenLimit`: the most tokens one recovery may skip.
const RECOVERY_LOOKAHEAD_LIMIT: usize = 256;

fn span(start: usize, end: usize) -> Span {
    // Sources are at most MAX_CODE_POINTS characters, so offsets fit u32.
    Span {
        start: start as u32,
        end: end as u32,
    }
}

impl Parser<'_> {
    /// The current token as ANTLR quotes it: its text, or `'<EOF>'`.
    fn quoted(&self) -> String {
        let t = &self.tokens[self.pos];
        if t.kind == Tok::Eof {
            return "'<EOF>'".into();
        }
        format!("'{}'", self.src.get(t.start..t.end).unwrap_or(""))
    }

    /// A token after a complete expression: ANTLR deletes it when the end follows it
    /// (`extraneous`), and reports a mismatch otherwise.
    fn trailing(&self) -> SyntaxError {
        let next_is_end = self
            .tokens
            .get(self.pos + 1)
            .is_none_or(|t| t.kind == Tok::Eof);
        let how = if next_is_end {
            "extraneous"
        } else {
            "mismatched"
        };
        SyntaxError {
            offset: self.start(),
            message: format!(
                "Syntax error: {how} input {} expecting <EOF>",
                self.quoted()
            ),
        }
    }

    /// A token that cannot start the expression expected here (`or_close`: or `)`, right
    /// after a call's `(`).
    fn expected_expr(&self, or_close: bool) -> SyntaxError {
        if let Tok::Reserved(_) = self.peek() {
            return self.unexpected();
        }
        let set = if or_close {
            EXPR_START.replacen("'(', ", "'(', ')', ", 1)
        } else {
            EXPR_START.to_string()
        };
        SyntaxError {
            offset: self.start(),
            message: format!(
                "Syntax error: mismatched input {} expecting {{{set}}}",
                self.quoted()
            ),
        }
    }

    /// The closing `)` or `]` of a group, call or index: at the end of input ANTLR reports
    /// it missing (it would insert it).
    fn close(&mut self, t: Tok) -> Result<Token, SyntaxError> {
        if self.peek() == &Tok::Eof && self.peek() != &t {
            return Err(SyntaxError {
                offset: self.start(),
                message: format!("Syntax error: missing {} at '<EOF>'", t.describe()),
            });
        }
        self.expect(t)
    }

    /// The end of a list or map literal after an element, where a `,` may also come.
    fn close_literal(&mut self, t: Tok) -> Result<Token, SyntaxError> {
        if self.peek() != &t && self.peek() != &Tok::Comma {
            return Err(SyntaxError {
                offset: self.start(),
                message: format!(
                    "Syntax error: mismatched input {} expecting {{{}, ','}}",
                    self.quoted(),
                    t.describe()
                ),
            });
        }
        self.expect(t)
    }

    /// ANTLR recovers from an error outside any bracket by skipping every token up to the
    /// end (its follow set there is `<EOF>` alone); cel-go stops a recovery that would skip
    /// more than [`RECOVERY_LOOKAHEAD_LIMIT`] tokens with an error of its own, at no location.
    fn recover_to_end(&mut self) {
        let open = self.tokens[..self.pos]
            .iter()
            .map(|t| match t.kind {
                Tok::LParen | Tok::LBracket | Tok::LBrace => 1,
                Tok::RParen | Tok::RBracket | Tok::RBrace => -1,
                _ => 0,
            })
            .sum::<i64>();
        let skipped = self.tokens[self.pos..]
            .iter()
            .take_while(|t| t.kind != Tok::Eof)
            .count();
        if open <= 0 && skipped > RECOVERY_LOOKAHEAD_LIMIT {
            self.recovery.push(SyntaxError {
                offset: NO_LOCATION,
                message: format!(
                    "error recovery token lookahead limit exceeded: {RECOVERY_LOOKAHEAD_LIMIT}"
                ),
            });
        }
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].kind
    }

    fn start(&self) -> usize {
        self.tokens[self.pos].start
    }

    fn prev_end(&self) -> usize {
        if self.pos == 0 {
            0
        } else {
            self.tokens[self.pos - 1].end
        }
    }

    fn bump(&mut self) -> Token {
        let t = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    /// Steps back over `tok` (the end-of-input token is never stepped over).
    fn unbump(&mut self, tok: &Token) {
        if tok.kind != Tok::Eof {
            self.pos -= 1;
        }
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: Tok) -> Result<Token, SyntaxError> {
        if self.peek() == &t {
            Ok(self.bump())
        } else {
            Err(SyntaxError {
                offset: self.start(),
                message: format!(
                    "Syntax error: mismatched input {} expecting {}",
                    self.quoted(),
                    t.describe()
                ),
            })
        }
    }

    fn unexpected(&self) -> SyntaxError {
        let tok = self.peek();
        let message = match tok {
            Tok::Reserved(w) => format!("reserved identifier: {w}"),
            _ => format!("Syntax error: extraneous input {}", self.quoted()),
        };
        SyntaxError {
            offset: self.start(),
            message,
        }
    }

    /// The nesting limit (brackets, calls, ternaries: cel-go's parse listener counting
    /// nested grammar rules), an error cel-go reports at no location.
    fn too_deep(&self, _at: usize) -> SyntaxError {
        SyntaxError {
            offset: NO_LOCATION,
            message: format!("expression recursion limit exceeded: {MAX_DEPTH}"),
        }
    }

    /// Builds a node whose children have the given depths, refusing trees deeper than the limit.
    /// A tree too deep without nesting brackets (a left-associative chain: `1 + 1 + ...`,
    /// `a.b.c...`) is what cel-go's AST visitor refuses, with its own text.
    fn node(&self, kind: ExprKind, sp: Span, pos: usize, child_depth: u32) -> PResult {
        let depth = child_depth + 1;
        if depth > MAX_DEPTH {
            return Err(SyntaxError {
                offset: NO_LOCATION,
                message: "max recursion depth exceeded".into(),
            });
        }
        Ok((
            Expr {
                span: sp,
                pos: pos as u32,
                kind,
            },
            depth,
        ))
    }

    fn call(&self, func: &str, args: Vec<(Expr, u32)>, sp: Span, pos: usize) -> PResult {
        let depth = args.iter().map(|a| a.1).max().unwrap_or(0);
        let args = args.into_iter().map(|a| a.0).collect();
        self.node(
            ExprKind::Call {
                func: func.to_string(),
                target: None,
                args,
            },
            sp,
            pos,
            depth,
        )
    }

    /// `expr: conditionalOr ('?' conditionalOr ':' expr)?`; `nesting` counts open brackets,
    /// calls and ternaries, which are the parser's own recursion.
    fn expr(&mut self, nesting: u32) -> PResult {
        if nesting >= MAX_DEPTH {
            return Err(self.too_deep(self.start()));
        }
        let start = self.start();
        let cond = self.logical(nesting, true)?;
        let question = self.start();
        if !self.eat(&Tok::Question) {
            return Ok(cond);
        }
        let yes = self.logical(nesting + 1, true)?;
        if let Err(e) = self.expect(Tok::Colon) {
            self.recover_to_end();
            return Err(e);
        }
        let no = self.expr(nesting + 1)?;
        let sp = span(start, self.prev_end());
        self.call("_?_:_", vec![cond, yes, no], sp, question)
    }

    /// `||` (when `or`) or `&&` chains, built as balanced trees as cel-go does, so a long
    /// chain stays shallow.
    fn logical(&mut self, nesting: u32, or: bool) -> PResult {
        let (op_tok, func) = if or {
            (Tok::OrOr, "_||_")
        } else {
            (Tok::AndAnd, "_&&_")
        };
        let first = if or {
            self.logical(nesting, false)?
        } else {
            self.relation(nesting)?
        };
        if self.peek() != &op_tok {
            return Ok(first);
        }
        let mut terms = vec![Some(first)];
        let mut ops = Vec::new();
        while self.peek() == &op_tok {
            ops.push(self.start());
            self.bump();
            let t = if or {
                self.logical(nesting, false)?
            } else {
                self.relation(nesting)?
            };
            terms.push(Some(t));
        }
        self.balance(func, &mut terms, &ops, 0, ops.len() - 1)
    }

    /// The balanced tree cel-go builds over `terms[lo..=hi + 1]` joined by `ops[lo..=hi]`:
    /// the middle operator `(lo + hi + 1) / 2` is the root, so both the tree's shape and each
    /// node's position (its operator token) are cel-go's. Recursion is logarithmic.
    fn balance(
        &self,
        func: &str,
        terms: &mut [Option<(Expr, u32)>],
        ops: &[usize],
        lo: usize,
        hi: usize,
    ) -> PResult {
        let mid = (lo + hi).div_ceil(2);
        let left = if mid == lo {
            terms[mid].take()
        } else {
            Some(self.balance(func, terms, ops, lo, mid - 1)?)
        };
        let right = if mid == hi {
            terms[mid + 1].take()
        } else {
            Some(self.balance(func, terms, ops, mid + 1, hi)?)
        };
        // Each term is taken exactly once: the ranges of the two halves do not overlap.
        let (Some(l), Some(r)) = (left, right) else {
            return Err(self.unexpected());
        };
        let sp = span(l.0.span.start as usize, r.0.span.end as usize);
        self.call(func, vec![l, r], sp, ops[mid])
    }

    fn relation(&mut self, nesting: u32) -> PResult {
        let mut lhs = self.additive(nesting)?;
        loop {
            let func = match self.peek() {
                Tok::Lt => "_<_",
                Tok::Le => "_<=_",
                Tok::Gt => "_>_",
                Tok::Ge => "_>=_",
                Tok::EqEq => "_==_",
                Tok::NotEq => "_!=_",
                Tok::In => "@in",
                _ => return Ok(lhs),
            };
            let at = self.bump().start;
            let rhs = self.additive(nesting)?;
            let sp = span(lhs.0.span.start as usize, rhs.0.span.end as usize);
            lhs = self.call(func, vec![lhs, rhs], sp, at)?;
        }
    }

    fn additive(&mut self, nesting: u32) -> PResult {
        let mut lhs = self.multiplicative(nesting)?;
        loop {
            let func = match self.peek() {
                Tok::Plus => "_+_",
                Tok::Minus => "_-_",
                _ => return Ok(lhs),
            };
            let at = self.bump().start;
            let rhs = self.multiplicative(nesting)?;
            let sp = span(lhs.0.span.start as usize, rhs.0.span.end as usize);
            lhs = self.call(func, vec![lhs, rhs], sp, at)?;
        }
    }

    fn multiplicative(&mut self, nesting: u32) -> PResult {
        let mut lhs = self.unary(nesting)?;
        loop {
            let func = match self.peek() {
                Tok::Star => "_*_",
                Tok::Slash => "_/_",
                Tok::Percent => "_%_",
                _ => return Ok(lhs),
            };
            let at = self.bump().start;
            let rhs = self.unary(nesting)?;
            let sp = span(lhs.0.span.start as usize, rhs.0.span.end as usize);
            lhs = self.call(func, vec![lhs, rhs], sp, at)?;
        }
    }

    /// `!`/`-` prefixes. As in cel-go, an even run of the same operator cancels out, and one
    /// `-` directly before a number is the literal's sign (so `-9223372036854775808` parses).
    fn unary(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let op = self.peek().clone();
        if op != Tok::Not && op != Tok::Minus {
            return self.member(nesting);
        }
        let mut count = 0u32;
        while self.peek() == &op {
            self.bump();
            count += 1;
        }
        if op == Tok::Minus
            && count == 1
            && matches!(self.peek(), Tok::Int(_) | Tok::IntOverflow | Tok::Double(_))
        {
            return self.signed_number(start, nesting);
        }
        let operand = self.member(nesting)?;
        if count.is_multiple_of(2) {
            return Ok(operand);
        }
        let func = if op == Tok::Not { "!_" } else { "-_" };
        let sp = span(start, self.prev_end());
        self.call(func, vec![operand], sp, start)
    }

    fn signed_number(&mut self, start: usize, nesting: u32) -> PResult {
        let tok = self.bump();
        let lit = match tok.kind {
            Tok::Int(v) if v <= (i64::MAX as u64) + 1 => {
                Literal::Int((v as i128).wrapping_neg() as i64)
            }
            Tok::Double(d) if d.is_finite() => Literal::Double(-d),
            Tok::Double(_) => {
                return Err(SyntaxError {
                    offset: start,
                    message: INVALID_DOUBLE.into(),
                });
            }
            _ => {
                return Err(SyntaxError {
                    offset: start,
                    message: "invalid int literal".into(),
                });
            }
        };
        let lit_node = (
            Expr {
                span: span(start, tok.end),
                pos: start as u32,
                kind: ExprKind::Literal(lit),
            },
            1,
        );
        self.member_suffixes(lit_node, nesting)
    }

    fn member(&mut self, nesting: u32) -> PResult {
        let primary = self.primary(nesting)?;
        self.member_suffixes(primary, nesting)
    }

    /// `.field`, `.?field`, `.method(args)`, `[index]`, `[?index]` after a primary.
    fn member_suffixes(&mut self, mut operand: (Expr, u32), nesting: u32) -> PResult {
        let start = operand.0.span.start as usize;
        loop {
            match self.peek() {
                Tok::Dot => {
                    let dot = self.bump().start;
                    let optional = self.eat(&Tok::Question);
                    let name_tok = self.bump();
                    let quoted = matches!(name_tok.kind, Tok::QuotedIdent(_));
                    let name = match name_tok.kind {
                        Tok::Ident(s) | Tok::QuotedIdent(s) => s,
                        Tok::Reserved(w) => w.to_string(),
                        // `.?` then the end: ANTLR would insert the missing name.
                        Tok::Eof if optional => {
                            self.unbump(&name_tok);
                            return Err(SyntaxError {
                                offset: name_tok.start,
                                message: "Syntax error: missing IDENTIFIER at '<EOF>'".into(),
                            });
                        }
                        // A literal keyword after the dot is a token the select rule
                        // cannot match (recorded for `object.null`).
                        Tok::Null | Tok::True | Tok::False => {
                            self.unbump(&name_tok);
                            let word = self.src.get(name_tok.start..name_tok.end).unwrap_or("");
                            return Err(SyntaxError {
                                offset: name_tok.start,
                                message: format!(
                                    "Syntax error: mismatched input '{word}' expecting IDENTIFIER"
                                ),
                            });
                        }
                        // Other keywords (`in`) are not names after a dot in cel-go's grammar:
                        // ANTLR finds no alternative from the dot on.
                        _ => {
                            self.unbump(&name_tok);
                            let end = if name_tok.kind == Tok::Eof {
                                dot + 1
                            } else {
                                name_tok.end
                            };
                            let text = self.src.get(dot..end).unwrap_or(".");
                            let error = SyntaxError {
                                offset: name_tok.start,
                                message: format!(
                                    "Syntax error: no viable alternative at input '{text}'"
                                ),
                            };
                            if name_tok.kind == Tok::In {
                                // ANTLR's recovery leaves `in` to the relation around,
                                // which reads it as its operator and goes on.
                                self.recovery.push(error);
                                return Ok(operand);
                            }
                            return Err(error);
                        }
                    };
                    if !optional && !quoted && self.peek() == &Tok::LParen {
                        let open = self.start();
                        let args = self.arguments(nesting)?;
                        let sp = span(start, self.prev_end());
                        operand = self.call_or_macro(name, Some(operand), args, sp, open)?;
                    } else {
                        let sp = span(start, self.prev_end());
                        let depth = operand.1;
                        let kind = ExprKind::Select {
                            operand: Box::new(operand.0),
                            field: name,
                            optional,
                        };
                        operand = self.node(kind, sp, dot, depth)?;
                    }
                }
                Tok::LBracket => {
                    let bracket = self.bump().start;
                    let optional = self.eat(&Tok::Question);
                    if !optional && !starts_expr(self.peek()) {
                        // After `[` a `?` may also come (`a[?i]`).
                        let mut e = self.expected_expr(false);
                        e.message = e.message.replacen("'!', ", "'!', '?', ", 1);
                        return Err(e);
                    }
                    let index = self.expr(nesting + 1)?;
                    self.close(Tok::RBracket)?;
                    let sp = span(start, self.prev_end());
                    let depth = operand.1.max(index.1);
                    let kind = ExprKind::Index {
                        operand: Box::new(operand.0),
                        index: Box::new(index.0),
                        optional,
                    };
                    operand = self.node(kind, sp, bracket, depth)?;
                }
                _ => return Ok(operand),
            }
        }
    }

    fn arguments(&mut self, nesting: u32) -> Result<Vec<(Expr, u32)>, SyntaxError> {
        self.expect(Tok::LParen)?;
        let mut args = Vec::new();
        if self.eat(&Tok::RParen) {
            return Ok(args);
        }
        if !starts_expr(self.peek()) {
            return Err(self.expected_expr(true));
        }
        loop {
            args.push(self.expr(nesting + 1)?);
            if self.eat(&Tok::Comma) {
                continue;
            }
            self.close(Tok::RParen)?;
            return Ok(args);
        }
    }

    fn primary(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let tok = self.bump();
        let lit = |l: Literal| {
            Ok((
                Expr {
                    span: span(tok.start, tok.end),
                    pos: tok.start as u32,
                    kind: ExprKind::Literal(l),
                },
                1,
            ))
        };
        match tok.kind.clone() {
            Tok::Int(v) => match i64::try_from(v) {
                Ok(v) => lit(Literal::Int(v)),
                Err(_) => Err(SyntaxError {
                    offset: start,
                    message: "invalid int literal".into(),
                }),
            },
            Tok::IntOverflow => Err(SyntaxError {
                offset: start,
                message: "invalid int literal".into(),
            }),
            Tok::UintOverflow => Err(SyntaxError {
                offset: start,
                message: "invalid uint literal".into(),
            }),
            Tok::Uint(v) => lit(Literal::Uint(v)),
            // Go's ParseFloat refuses a literal beyond the largest double (cel-go keeps
            // its error); Rust's gives infinity.
            Tok::Double(d) if d.is_finite() => lit(Literal::Double(d)),
            Tok::Double(_) => Err(SyntaxError {
                offset: start,
                message: INVALID_DOUBLE.into(),
            }),
            Tok::Str(s) => lit(Literal::String(s)),
            Tok::Bytes(b) => lit(Literal::Bytes(b)),
            Tok::True => lit(Literal::Bool(true)),
            Tok::False => lit(Literal::Bool(false)),
            Tok::Null => lit(Literal::Null),
            Tok::LParen => {
                let inner = self.expr(nesting + 1)?;
                self.close(Tok::RParen)?;
                Ok(inner)
            }
            Tok::LBracket => self.list(start, nesting),
            Tok::LBrace => self.map(start, nesting),
            Tok::Dot => match self.peek().clone() {
                Tok::Ident(name) => {
                    let at = self.bump().start;
                    self.ident_or_call(name, start, at, nesting)
                }
                _ => Err(self.unexpected()),
            },
            Tok::Ident(name) => self.ident_or_call(name, start, start, nesting),
            _ => {
                self.unbump(&tok);
                let error = self.expected_expr(false);
                if tok.kind == Tok::In {
                    // As after `.in`: the relation around takes `in` as its operator.
                    self.recovery.push(error);
                    let sp = span(start, start);
                    return self.node(ExprKind::Ident("in".into()), sp, start, 0);
                }
                Err(error)
            }
        }
    }

    /// `name`, `name(args)` or `Name{...}`; `start` is where the expression starts (a leading
    /// dot), `at` the identifier.
    fn ident_or_call(&mut self, name: String, start: usize, at: usize, nesting: u32) -> PResult {
        if self.peek() == &Tok::LParen {
            let open = self.start();
            let args = self.arguments(nesting)?;
            let sp = span(start, self.prev_end());
            return self.call_or_macro(name, None, args, sp, open);
        }
        // `a.b.C{...}`: cel-go's grammar reads a dotted name followed by `{` as a message
        // construction.
        let mut k = self.pos;
        while self.tokens[k].kind == Tok::Dot
            && matches!(self.tokens.get(k + 1).map(|t| &t.kind), Some(Tok::Ident(_)))
        {
            k += 2;
        }
        if self.tokens[k].kind == Tok::LBrace {
            let mut qualified = name;
            for t in &self.tokens[self.pos..k] {
                if let Tok::Ident(n) = &t.kind {
                    qualified.push('.');
                    qualified.push_str(n);
                }
            }
            self.pos = k;
            return self.message(qualified, start, nesting);
        }
        let sp = span(start, self.prev_end());
        self.node(ExprKind::Ident(name), sp, at, 0)
    }

    /// A message construction's `{field: value, ...}`, the name read.
    fn message(&mut self, type_name: String, start: usize, nesting: u32) -> PResult {
        let brace = self.bump().start;
        let mut fields = Vec::new();
        let mut depth = 0;
        self.lone_comma(Tok::RBrace);
        while self.peek() != &Tok::RBrace {
            let optional = self.eat(&Tok::Question);
            let name = match self.peek().clone() {
                Tok::Ident(n) | Tok::QuotedIdent(n) => {
                    self.bump();
                    n
                }
                _ => {
                    return Err(self
                        .expect(Tok::Ident(String::new()))
                        .err()
                        .unwrap_or_else(|| self.unexpected()))
                }
            };
            let colon = self.expect(Tok::Colon)?.start;
            let (value, d) = self.expr(nesting + 1)?;
            depth = depth.max(d);
            fields.push(FieldInit {
                name,
                value,
                optional,
                pos: colon as u32,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.close_literal(Tok::RBrace)?;
        let sp = span(start, self.prev_end());
        self.node(ExprKind::Struct { type_name, fields }, sp, brace, depth)
    }

    /// The trailing `,` CEL's grammar allows after a literal's elements, alone in an empty
    /// literal (`[,]`, `{,}`), which cel-go accepts.
    fn lone_comma(&mut self, close: Tok) {
        if self.peek() == &Tok::Comma
            && self
                .tokens
                .get(self.pos + 1)
                .is_some_and(|t| t.kind == close)
        {
            self.bump();
        }
    }

    /// ANTLR's single-token deletion where a list or map literal begins: a token that cannot
    /// come there, followed by one that can, is reported extraneous and skipped, and parsing
    /// goes on (`{: 1}` reports the `:`, then the missing one after `1`).
    fn delete_extraneous(&mut self, close: Tok) {
        let can_begin =
            |t: &Tok| *t == close || matches!(t, Tok::Comma | Tok::Question) || starts_expr(t);
        if can_begin(self.peek()) || self.peek() == &Tok::Eof {
            return;
        }
        if !self
            .tokens
            .get(self.pos + 1)
            .is_some_and(|t| can_begin(&t.kind))
        {
            return;
        }
        // ANTLR lists the set by token number: `]` after `[`, `}` after `{`, `,` after `.`,
        // `?` after `!`.
        let set = EXPR_START
            .replacen("'.', ", "'.', ',', ", 1)
            .replacen("'!', ", "'!', '?', ", 1);
        let set = if close == Tok::RBracket {
            set.replacen("'[', ", "'[', ']', ", 1)
        } else {
            set.replacen("'{', ", "'{', '}', ", 1)
        };
        self.recovery.push(SyntaxError {
            offset: self.start(),
            message: format!(
                "Syntax error: extraneous input {} expecting {{{set}}}",
                self.quoted()
            ),
        });
        self.bump();
    }

    fn list(&mut self, start: usize, nesting: u32) -> PResult {
        let mut elements = Vec::new();
        let mut optional = Vec::new();
        let mut depth = 0;
        self.delete_extraneous(Tok::RBracket);
        self.lone_comma(Tok::RBracket);
        while self.peek() != &Tok::RBracket {
            let opt = self.eat(&Tok::Question);
            let (e, d) = self.expr(nesting + 1)?;
            depth = depth.max(d);
            elements.push(e);
            optional.push(opt);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.close_literal(Tok::RBracket)?;
        let sp = span(start, self.prev_end());
        self.node(ExprKind::List { elements, optional }, sp, start, depth)
    }

    fn map(&mut self, start: usize, nesting: u32) -> PResult {
        let mut entries = Vec::new();
        let mut depth = 0;
        self.delete_extraneous(Tok::RBrace);
        self.lone_comma(Tok::RBrace);
        while self.peek() != &Tok::RBrace {
            let opt = self.eat(&Tok::Question);
            let (key, kd) = self.expr(nesting + 1)?;
            self.expect(Tok::Colon)?;
            let (value, vd) = self.expr(nesting + 1)?;
            depth = depth.max(kd).max(vd);
            entries.push(MapEntry {
                key,
                value,
                optional: opt,
            });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.close_literal(Tok::RBrace)?;
        let sp = span(start, self.prev_end());
        self.node(ExprKind::Map { entries }, sp, start, depth)
    }

    /// A call, or the expansion of the macro it spells.
    fn call_or_macro(
        &mut self,
        func: String,
        target: Option<(Expr, u32)>,
        args: Vec<(Expr, u32)>,
        sp: Span,
        open: usize,
    ) -> PResult {
        if let Some(expanded) = self.expand_macro(&func, target.as_ref(), &args, sp, open)? {
            return Ok(expanded);
        }
        let depth = target.iter().chain(&args).map(|a| a.1).max().unwrap_or(0);
        let target = target.map(|t| Box::new(t.0));
        let args = args.into_iter().map(|a| a.0).collect();
        self.node(ExprKind::Call { func, target, args }, sp, open, depth)
    }

    fn expand_macro(
        &self,
        func: &str,
        target: Option<&(Expr, u32)>,
        args: &[(Expr, u32)],
        sp: Span,
        open: usize,
    ) -> Result<Option<(Expr, u32)>, SyntaxError> {
        let Some(target) = target else {
            if func == "has" && args.len() == 1 {
                return match &args[0].0.kind {
                    ExprKind::Select {
                        operand,
                        field,
                        optional: false,
                    } => {
                        let kind = ExprKind::Has {
                            operand: operand.clone(),
                            field: field.clone(),
                        };
                        Ok(Some(self.node(kind, sp, open, args[0].1)?))
                    }
                    _ => Err(SyntaxError {
                        offset: args[0].0.pos as usize,
                        message: "invalid argument to has() macro".into(),
                    }),
                };
            }
            return Ok(None);
        };
        use MacroKind::*;
        // (kind, written name, number of variables, has a filter)
        let shape: (MacroKind, &'static str, usize, bool) = match (func, args.len()) {
            ("all", 2) => (All, "all", 1, false),
            ("all", 3) => (All, "all", 2, false),
            ("exists", 2) => (Exists, "exists", 1, false),
            ("exists", 3) => (Exists, "exists", 2, false),
            ("exists_one", 2) => (ExistsOne, "exists_one", 1, false),
            ("exists_one", 3) => (ExistsOne, "exists_one", 2, false),
            ("existsOne", 2) => (ExistsOne, "existsOne", 1, false),
            ("existsOne", 3) => (ExistsOne, "existsOne", 2, false),
            ("map", 2) => (Map, "map", 1, false),
            ("map", 3) => (Map, "map", 1, true),
            ("filter", 2) => (Filter, "filter", 1, false),
            ("transformList", 3) => (TransformList, "transformList", 2, false),
            ("transformList", 4) => (TransformList, "transformList", 2, true),
            ("transformMap", 3) => (TransformMap, "transformMap", 2, false),
            ("transformMap", 4) => (TransformMap, "transformMap", 2, true),
            ("transformMapEntry", 3) => (TransformMapEntry, "transformMapEntry", 2, false),
            ("transformMapEntry", 4) => (TransformMapEntry, "transformMapEntry", 2, true),
            ("sortBy", 2) => (SortBy, "sortBy", 1, false),
            ("optMap", 2) => (OptMap, "optMap", 1, false),
            ("optFlatMap", 2) => (OptFlatMap, "optFlatMap", 1, false),
            _ => return Ok(None),
        };
        let (kind, name, nvars, has_filter) = shape;
        let var_name = |a: &(Expr, u32)| match &a.0.kind {
            ExprKind::Ident(n) => Ok(n.clone()),
            _ => Err(SyntaxError {
                offset: a.0.pos as usize,
                message: "argument must be a simple name".into(),
            }),
        };
        let var = var_name(&args[0])?;
        let var2 = if nvars == 2 {
            Some(var_name(&args[1])?)
        } else {
            None
        };
        if let Some(v2) = &var2 {
            if *v2 == var {
                return Err(SyntaxError {
                    offset: args[1].0.pos as usize,
                    message: format!("duplicate variable name: {var}"),
                });
            }
        }
        let rest = &args[nvars..];
        let (filter, body) = if has_filter {
            (Some(rest[0].clone()), rest[1].clone())
        } else {
            (None, rest[0].clone())
        };
        let depth = [target.1, body.1, filter.as_ref().map_or(0, |f| f.1)]
            .into_iter()
            .max()
            .unwrap_or(0);
        let c = Comprehension {
            kind,
            name,
            range: target.0.clone(),
            var,
            var2,
            filter: filter.map(|f| f.0),
            body: body.0,
        };
        Ok(Some(self.node(
            ExprKind::Comprehension(Box::new(c)),
            sp,
            open,
            depth,
        )?))
    }
}

/// Whether `t` can start an expression.
fn starts_expr(t: &Tok) -> bool {
    matches!(
        t,
        Tok::LBracket
            | Tok::LBrace
            | Tok::LParen
            | Tok::Dot
            | Tok::Minus
            | Tok::Not
            | Tok::True
            | Tok::False
            | Tok::Null
            | Tok::Int(_)
            | Tok::IntOverflow
            | Tok::Uint(_)
            | Tok::UintOverflow
            | Tok::Double(_)
            | Tok::Str(_)
            | Tok::Bytes(_)
            | Tok::Ident(_)
            | Tok::Reserved(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Literal(l) => format!("{l:?}"),
            ExprKind::Ident(n) => n.clone(),
            ExprKind::Select {
                operand,
                field,
                optional,
            } => {
                format!(
                    "{}.{}{}",
                    show(operand),
                    if *optional { "?" } else { "" },
                    field
                )
            }
            ExprKind::Has { operand, field } => format!("has({}.{})", show(operand), field),
            ExprKind::Index { operand, index, .. } => format!("{}[{}]", show(operand), show(index)),
            ExprKind::Call { func, target, args } => {
                let a: Vec<String> = args.iter().map(show).collect();
                match target {
                    Some(t) => format!("{}.{}({})", show(t), func, a.join(", ")),
                    None => format!("{}({})", func, a.join(", ")),
                }
            }
            ExprKind::List { elements, .. } => {
                format!(
                    "[{}]",
                    elements.iter().map(show).collect::<Vec<_>>().join(", ")
                )
            }
            ExprKind::Map { entries } => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|e| format!("{}: {}", show(&e.key), show(&e.value)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ExprKind::Struct { type_name, fields } => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name, show(&f.value)))
                    .collect();
                format!("{type_name}{{{}}}", fields.join(", "))
            }
            ExprKind::Comprehension(c) => format!(
                "{}.{:?}({}, {})",
                show(&c.range),
                c.kind,
                c.var,
                show(&c.body)
            ),
        }
    }

    fn p(src: &str) -> String {
        show(&parse(src).unwrap())
    }

    #[test]
    fn precedence() {
        assert_eq!(p("1 + 2 * 3"), "_+_(Int(1), _*_(Int(2), Int(3)))");
        assert_eq!(p("a == b < c"), "_<_(_==_(a, b), c)");
        assert_eq!(p("a ? b : c ? d : e"), "_?_:_(a, b, _?_:_(c, d, e))");
        assert_eq!(p("!!a"), "a");
        assert_eq!(p("-1"), "Int(-1)");
        assert_eq!(p("--1"), "Int(1)");
        assert_eq!(p("-(1)"), "-_(Int(1))");
        assert_eq!(p("-9223372036854775808"), "Int(-9223372036854775808)");
        assert_eq!(p("a.b[0].c(1)"), "a.b[Int(0)].c(Int(1))");
        assert_eq!(p("x in [1, 2]"), "@in(x, [Int(1), Int(2)])");
    }

    #[test]
    fn macros() {
        assert_eq!(p("has(a.b)"), "has(a.b)");
        assert_eq!(p("l.all(x, x > 0)"), "l.All(x, _>_(x, Int(0)))");
        assert!(parse("has(a)").is_err());
        assert!(parse("l.all(1, true)").is_err());
        assert!(parse("l.all(x, x, true)").is_err());
    }

    #[test]
    fn logical_chains_are_balanced() {
        let src = vec!["a"; 5000].join(" || ");
        assert!(parse(&src).is_ok());
    }

    /// Runs on a big stack like `Env::compile` does; the parser itself recurses per level.
    #[test]
    fn hostile_input_is_an_error_not_a_crash() {
        std::thread::Builder::new()
            .stack_size(crate::program::COMPILER_STACK)
            .spawn(hostile)
            .unwrap()
            .join()
            .unwrap();
    }

    fn hostile() {
        let chain = vec!["1"; 10_000].join("+");
        // At no location, as cel-go's AST visitor reports it (recorded from 1.32).
        assert_eq!(
            parse(&chain).unwrap_err().to_string(),
            "ERROR: <input>:-1:0: max recursion depth exceeded"
        );
        let nested = format!("{}1{}", "(".repeat(1000), ")".repeat(1000));
        assert!(parse(&nested)
            .unwrap_err()
            .to_string()
            .contains("recursion limit"));
        let lists = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
        assert!(parse(&lists).is_err());
        let members = format!("a{}", ".b".repeat(10_000));
        assert!(parse(&members).is_err());
        assert!(parse(&"1".repeat(100_001))
            .unwrap_err()
            .to_string()
            .contains("code point size"));
    }

    #[test]
    fn an_empty_literal_may_hold_the_trailing_comma_alone() {
        assert_eq!(p("[,]"), "[]");
        assert_eq!(p("{,}"), "{}");
        assert!(parse("[,,]").is_err());
        assert!(parse("[1,,]").is_err());
        assert!(parse("f(,)").is_err());
    }

    /// `in` where an operand or a field name is expected: ANTLR reports it, then its
    /// recovery lets the relation around read `in` as its operator, and goes on.
    #[test]
    fn a_misplaced_in_is_read_as_the_operator_after_the_error() {
        let err = |src: &str| parse(src).unwrap_err().to_string();
        let missing_rhs = "Syntax error: mismatched input '<EOF>' expecting {";
        let both = err("object.spec.in");
        assert!(both.starts_with(
            "ERROR: <input>:1:13: Syntax error: no viable alternative at input '.in'"
        ));
        assert!(both.contains(&format!("ERROR: <input>:1:15: {missing_rhs}")));
        let alone = err("in");
        assert!(alone
            .starts_with("ERROR: <input>:1:1: Syntax error: mismatched input 'in' expecting {"));
        assert!(alone.contains(&format!("ERROR: <input>:1:3: {missing_rhs}")));
        // With an operand after `in`, the first error alone.
        let one = err("object.spec.in x");
        assert_eq!(one.matches("ERROR").count(), 1, "{one}");
    }

    /// ANTLR deletes a token that cannot begin a literal's contents when the next one can.
    #[test]
    fn a_stray_token_opening_a_literal_is_deleted_and_parsing_goes_on() {
        let err = parse("{: 1}").unwrap_err().to_string();
        assert!(err.starts_with("ERROR: <input>:1:2: Syntax error: extraneous input ':' expecting {'[', '{', '}', '(', '.', ',', '-', '!', '?', 'true'"), "{err}");
        assert!(
            err.contains("ERROR: <input>:1:5: Syntax error: mismatched input '}' expecting ':'"),
            "{err}"
        );
        let err = parse("[: 1]").unwrap_err().to_string();
        assert!(
            err.starts_with(
                "ERROR: <input>:1:2: Syntax error: extraneous input ':' expecting {'[', ']', '{'"
            ),
            "{err}"
        );
        assert_eq!(err.matches("ERROR").count(), 1, "{err}");
    }

    /// A ternary missing its `:` outside brackets: ANTLR skips to the end to recover, and
    /// cel-go stops a recovery past 256 tokens with an error at no location, shown first.
    #[test]
    fn a_long_recovery_reports_the_lookahead_limit_first() {
        let nested = |n: usize| format!("{}1{}", "true ? ".repeat(n), " : 0".repeat(n));
        let short = parse(&nested(10)).unwrap_err().to_string();
        assert!(short
            .starts_with("ERROR: <input>:1:13: Syntax error: mismatched input '?' expecting ':'"));
        let long = parse(&nested(100)).unwrap_err().to_string();
        assert!(long.starts_with(
            "ERROR: <input>:-1:0: error recovery token lookahead limit exceeded: 256\nERROR: <input>:1:13: Syntax error: mismatched input '?' expecting ':'"
        ));
        // In parentheses, the recovery stops at the `)`: no limit.
        let enclosed = parse(&format!("({})", nested(100)))
            .unwrap_err()
            .to_string();
        assert!(!enclosed.contains("lookahead"));
    }

    /// The node positions cel-go's parser gives, as byte offsets.
    #[test]
    fn nodes_sit_where_cel_go_places_them() {
        let at = |src: &str| parse(src).unwrap().pos;
        assert_eq!(at("a.b"), 1);
        assert_eq!(at("a.?b"), 1);
        assert_eq!(at("a[0]"), 1);
        assert_eq!(at("a.f(1)"), 3);
        assert_eq!(at("f(1)"), 1);
        assert_eq!(at(".f(1)"), 2);
        assert_eq!(at(".a"), 1);
        assert_eq!(at("1 - 2"), 2);
        assert_eq!(at("!a"), 0);
        assert_eq!(at("a ? b : c"), 2);
        assert_eq!(at("[1]"), 0);
        assert_eq!(at("{1: 2}"), 0);
        assert_eq!(at("(a)"), 1);
        assert_eq!(at("-1"), 0);
        assert_eq!(at("l.all(x, x)"), 5);
        assert_eq!(at("has(a.b)"), 3);
    }

    /// `a || b || c || d || e`: cel-go roots the tree at the middle operator (index
    /// `(lo + hi + 1) / 2` of the operators) and balances each side the same way.
    #[test]
    fn logical_chains_take_cel_go_shape() {
        let e = parse("a || b || c || d || e").unwrap();
        assert_eq!(
            p("a || b || c || d || e"),
            "_||_(_||_(_||_(a, b), c), _||_(d, e))"
        );
        assert_eq!(e.pos, 12);
        let ExprKind::Call { args, .. } = &e.kind else {
            panic!("not a call")
        };
        assert_eq!(args[0].pos, 7);
        assert_eq!(args[1].pos, 17);
        assert_eq!(p("a && b && c"), "_&&_(_&&_(a, b), c)");
    }

    /// Messages as cel-go's ANTLR parser words them.
    #[test]
    fn syntax_errors_read_as_antlr_writes_them() {
        let msg = |src: &str| {
            let e = parse(src).unwrap_err();
            (e.issues[0].column, e.message().to_string())
        };
        assert_eq!(
            msg("(1"),
            (3, "Syntax error: missing ')' at '<EOF>'".into())
        );
        assert_eq!(
            msg("1)"),
            (
                2,
                "Syntax error: extraneous input ')' expecting <EOF>".into()
            )
        );
        assert_eq!(
            msg("true and false"),
            (
                6,
                "Syntax error: mismatched input 'and' expecting <EOF>".into()
            )
        );
        assert_eq!(
            msg("{1: 2"),
            (
                6,
                "Syntax error: mismatched input '<EOF>' expecting {'}', ','}".into()
            )
        );
        assert_eq!(
            msg("true ? 1"),
            (
                9,
                "Syntax error: mismatched input '<EOF>' expecting ':'".into()
            )
        );
        assert_eq!(
            msg("f(1,)"),
            (
                5,
                format!("Syntax error: mismatched input ')' expecting {{{EXPR_START}}}")
            )
        );
        assert!(msg("'a'.size(").1.contains("{'[', '{', '(', ')', '.',"));
        assert!(msg("a[]").1.contains("'-', '!', '?', 'true'"));
        assert_eq!(
            msg("1..2"),
            (
                3,
                "Syntax error: no viable alternative at input '..2'".into()
            )
        );
        assert_eq!(
            msg("a.in"),
            (
                3,
                "Syntax error: no viable alternative at input '.in'".into()
            )
        );
        assert_eq!(
            msg("a.?"),
            (4, "Syntax error: missing IDENTIFIER at '<EOF>'".into())
        );
        assert_eq!(msg("").0, 0);
    }

    /// Text the lexer cannot recognize is skipped as ANTLR skips it, and the parser's
    /// error on what is left is reported too.
    #[test]
    fn unrecognized_text_is_reported_with_the_parse_error_after_it() {
        let all = |src: &str| -> Vec<(usize, String)> {
            parse(src)
                .unwrap_err()
                .issues
                .iter()
                .map(|i| (i.column, i.message.clone()))
                .collect()
        };
        assert_eq!(
            all("true & false"),
            [
                (
                    6,
                    "Syntax error: token recognition error at: '& '".to_string()
                ),
                (
                    8,
                    "Syntax error: extraneous input 'false' expecting <EOF>".to_string()
                )
            ]
        );
        assert_eq!(
            all("1 === 1"),
            [(
                5,
                "Syntax error: token recognition error at: '= '".to_string()
            )]
        );
        assert_eq!(
            all("`a`"),
            [
                (
                    1,
                    "Syntax error: token recognition error at: '`'".to_string()
                ),
                (
                    3,
                    "Syntax error: token recognition error at: '`'".to_string()
                )
            ]
        );
        assert_eq!(
            all("'\\x4'")[0],
            (
                1,
                "Syntax error: token recognition error at: ''\\x4''".to_string()
            )
        );
        assert_eq!(
            all("'''triple"),
            [(
                3,
                "Syntax error: token recognition error at: ''triple'".to_string()
            )]
        );
        assert_eq!(all("'open").len(), 2);
        assert!(parse("a.`b-c`").is_ok());
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a +").unwrap_err();
        assert_eq!(e.issues[0].line, 1);
        assert_eq!(e.issues[0].column, 4);
        assert!(parse("if").is_err());
        assert!(parse("a.if").is_ok());
        assert!(parse("9223372036854775808").is_err());
        assert_eq!(
            parse("if").unwrap_err().message(),
            "reserved identifier: if"
        );
        assert_eq!(
            parse("18446744073709551616u").unwrap_err().message(),
            "invalid uint literal"
        );
        let e = parse("b'\\u00ff'").unwrap_err();
        assert_eq!(
            (e.issues[0].column, e.message()),
            (1, "unable to unescape string")
        );
    }
}
