//! The CEL parser: tokens to [`Expr`], with cel-go's limits, macro expansion and syntax
//! error recovery.
//!
//! celgate parses CEL itself rather than with the `cel` crate: that crate's ANTLR parser
//! recurses once per operator of a left-associative chain and per nesting level, and aborts
//! the process with a stack overflow on 60 nested parentheses or a 10,000-term `1+1+...` in a
//! debug build. Here left-associative chains are loops, nesting is counted, and a tree deeper
//! than cel-go's limits ([`MAX_DEPTH`]) or celgate's ([`MAX_TREE_DEPTH`]) is refused before it
//! is built, so no later pass (checker, planner,
//! evaluator, even `Drop`) can recurse without bound. Limits are cel-go's defaults: 100,000
//! code points and a recursion depth of 250.
//!
//! Syntax errors are found and recovered from as cel-go's generated ANTLR parser does
//! (cel-go v0.22.0 `parser/gen/CEL.g4` and `cel_parser.go`, antlr4-go v4.13.0
//! `error_strategy.go`), so that the same errors are reported for the same input:
//! - each grammar rule (`expr`, `unary`, `member`, `primary`, the initializer lists) catches
//!   the errors raised inside it, reports the first one (none while already recovering, until
//!   a token is matched again), skips tokens until one that may follow a rule on the stack of
//!   rules being parsed (the union of their FOLLOW sets: [`Parser::follows`]) and returns, so
//!   that the rules around it go on and may report further errors;
//! - matching a token (`match`) first tries single-token deletion (`extraneous input X
//!   expecting T` when the token after X is T) and insertion (`missing T at X` when X may
//!   follow T), else reports `mismatched input X expecting T`;
//! - a block start (`Sync`) that sees a token none of its alternatives begins with tries the
//!   deletion too, else reports `mismatched input X expecting {...}`;
//! - a prediction that fails after reading a token past the decision (a `.` not followed by a
//!   name) reports `no viable alternative at input '...'` with the text read, and leaves the
//!   input where the decision started;
//! - cel-go's limits: 30 recoveries (`error recovery attempt limit exceeded`), 256 tokens
//!   skipped by one recovery (`error recovery token lookahead limit exceeded`), 100 reports.

use super::antlr::{quote, ty, type_of, TokSet, CALC_OPS, EXPR_FIRST, MEMBER_FIRST, RELATION_OPS};
use super::ast::{Comprehension, Expr, ExprKind, FieldInit, Literal, MacroKind, MapEntry, Span};
use super::error::{issue_at, CompileError, Issue, SyntaxError};
use super::lexer::{tokenize_recovering, Tok, Token};
use super::overload::since;

/// cel-go's text for a double literal Go cannot parse (out of range).
const INVALID_DOUBLE: &str = "invalid double literal";

/// cel-go's default `ExpressionSizeCodePointLimit`.
pub const MAX_CODE_POINTS: usize = 100_000;
/// cel-go's default `MaxRecursionDepth`: the most nested grammar rules of one kind (ANTLR's
/// `recursionListener`) and the most nested ternaries, operators, selections, member calls and
/// indexes along one path of the tree (the AST visitor's `checkAndIncrementRecursionDepth`).
pub const MAX_DEPTH: u32 = 250;
/// celgate's own bound on the depth of the tree built, every node kind counted, so that no
/// later pass (checker, planner, evaluator, `Drop`) recurses deeper than a thread's stack
/// holds. cel-go has none: its visitor leaves lists, maps, global calls, unary operators and
/// `&&`/`||` uncounted, and the per-rule limit allows 250 levels of brackets, so only trees
/// of several nodes per bracket level, which no policy writes, are refused here and not there.
pub const MAX_TREE_DEPTH: u32 = 1000;
/// cel-go's default `ErrorRecoveryLookaheadTokenLimit`: the most tokens one recovery may skip.
pub const RECOVERY_LOOKAHEAD_LIMIT: usize = 256;
/// cel-go's default `ErrorRecoveryLimit`: the most recoveries one parse may attempt.
pub const RECOVERY_LIMIT: usize = 30;
/// cel-go's default `ErrorReportingLimit`: the most syntax errors reported before parsing stops.
pub const REPORTING_LIMIT: usize = 100;

/// Parses `source`, expanding macros, with the newest grammar (for tests: the engine parses
/// for the environment's version).
#[cfg(test)]
pub fn parse(source: &str) -> Result<Expr, CompileError> {
    parse_for(source, u16::MAX)
}

/// Parses `source` with the grammar of the cel-go that Kubernetes 1.`version` vendors.
pub fn parse_for(source: &str, version: u16) -> Result<Expr, CompileError> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(CompileError::general(
            source,
            format!(
                "expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
            ),
        ));
    }
    let (tokens, unrecognized) = tokenize_recovering(source, version >= since::ESCAPED_IDENTIFIERS)
        .map_err(|e| CompileError::at(source, e.offset, e.message))?;
    let mut p = Parser {
        tokens,
        pos: 0,
        src: source,
        errors: Vec::new(),
        recovering: false,
        last_error: None,
        recoveries: 0,
        follows: Vec::new(),
        visitor: Vec::new(),
    };
    let result = p.start_rule();
    // The lexer's errors and the parser's go to the same listener, which stops the parse at
    // its 101st report; the lexer runs just ahead of the parser, so position order is the
    // order they were reported in.
    let mut reported: Vec<SyntaxError> = unrecognized.into_iter().chain(p.errors).collect();
    reported.sort_by_key(|e| e.offset);
    // cel-go visits the tree only when the parse ran to its end.
    let visited = result.is_ok() && reported.len() <= REPORTING_LIMIT;
    if reported.len() > REPORTING_LIMIT {
        reported.truncate(REPORTING_LIMIT + 1);
        if let Some(last) = reported.last_mut() {
            last.message = format!("Syntax error: More than {REPORTING_LIMIT} syntax errors");
        }
    }
    if visited {
        reported.extend(p.visitor);
    }
    let stop = match result {
        Ok(e) if reported.is_empty() => return Ok(e),
        Ok(_) | Err(Stop::Aborted) => None,
        Err(Stop::Fatal(e) | Stop::Recognition(e)) => Some(e),
    };
    let issues: Vec<Issue> = reported
        .into_iter()
        .chain(stop)
        .map(|e| located(source, e))
        .collect();
    let mut err = CompileError::from_issues(source, issues);
    // ANTLR places the end of an empty input at column -1, which cel-go shows as 0.
    if source.is_empty() {
        for issue in err.issues.iter_mut().filter(|i| i.line == 1) {
            issue.column = 0;
        }
    }
    Err(err)
}

/// How a rule stops: an error it reports and recovers from (ANTLR's recognition errors, all
/// worded `Syntax error: ...`), an error that ends the parse (cel-go's visitor and limits),
/// or an end of the parse whose error is already reported.
#[derive(Debug)]
enum Stop {
    Recognition(SyntaxError),
    Fatal(SyntaxError),
    Aborted,
}

impl From<SyntaxError> for Stop {
    fn from(e: SyntaxError) -> Stop {
        match e.message.starts_with("Syntax error: ") {
            true => Stop::Recognition(e),
            false => Stop::Fatal(e),
        }
    }
}

type PResult = Result<(Expr, Depth), Stop>;
type NResult = Result<(Expr, Depth), SyntaxError>;

/// How deep a built subtree is: in nodes of every kind (against [`MAX_TREE_DEPTH`]) and in the
/// nodes cel-go's visitor counts (against [`MAX_DEPTH`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Depth {
    tree: u32,
    visitor: u32,
}

impl Depth {
    /// A leaf: one node, which the visitor does not count.
    const LEAF: Depth = Depth {
        tree: 1,
        visitor: 0,
    };

    fn max(self, other: Depth) -> Depth {
        Depth {
            tree: self.tree.max(other.tree),
            visitor: self.visitor.max(other.visitor),
        }
    }

    /// The deepest of `depths` (none: an empty subtree).
    fn deepest<'a>(depths: impl IntoIterator<Item = &'a Depth>) -> Depth {
        depths
            .into_iter()
            .fold(Depth::default(), |acc, d| acc.max(*d))
    }
}

/// Whether cel-go's AST visitor counts a node against [`MAX_DEPTH`] (parser.go `Visit`: it
/// calls `checkAndIncrementRecursionDepth` for an `ExprContext` with a `?`, a `RelationContext`
/// or `CalcContext` with an operator, a `SelectContext`, `MemberCallContext` or `IndexContext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visit {
    Counted,
    Uncounted,
}

/// The offset of a syntax error that belongs to no place in the source.
const NO_LOCATION: usize = usize::MAX;

/// A syntax error as an issue (at no location for [`NO_LOCATION`]).
fn located(source: &str, e: SyntaxError) -> Issue {
    if e.offset == NO_LOCATION {
        return Issue {
            line: 0,
            column: 0,
            message: e.message,
        };
    }
    issue_at(source, e.offset, e.message)
}

/// What may follow a rule where it is invoked (ANTLR's `NextTokens` of the state after the
/// rule reference), and whether the invoking rule may end there (`nullable`: then what follows
/// the invoking rule may come too).
#[derive(Debug, Clone, Copy)]
struct Follow {
    set: TokSet,
    nullable: bool,
}

impl Follow {
    const fn then(types: &[u32]) -> Follow {
        Follow {
            set: TokSet::of(types),
            nullable: false,
        }
    }
    const fn or_end(types: &[u32]) -> Follow {
        Follow {
            set: TokSet::of(types),
            nullable: true,
        }
    }
    const fn set(set: TokSet) -> Follow {
        Follow {
            set,
            nullable: false,
        }
    }
}

/// The end of a rule: only what follows it where it was invoked.
const RULE_END: Follow = Follow::or_end(&[]);
/// The end of a `member` suffix: another suffix or what follows the member.
const MEMBER_END: Follow = Follow::or_end(&[ty::DOT, ty::LBRACKET]);

/// The ANTLR rule that catches an error, for cel-go's failsafe: a second recovery at the same
/// token by a rule that already recovered there skips one token first.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Site {
    Start,
    Expr,
    Unary,
    Member,
    Primary,
    MapInit,
    FieldInit,
    OptField,
}

struct Parser<'s> {
    /// The source, to quote tokens in messages as ANTLR does (by their text).
    src: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    /// The errors reported.
    errors: Vec<SyntaxError>,
    /// ANTLR's error recovery mode: set by a report, cleared by the next matched token; no
    /// error is reported while it is set.
    recovering: bool,
    /// The token and the rules of the last recovery (ANTLR's `lastErrorIndex`/`States`).
    last_error: Option<(usize, Vec<Site>)>,
    /// Recoveries attempted (cel-go's `recoveryAttempts`).
    recoveries: usize,
    /// The FOLLOW of each rule invocation being parsed, innermost last.
    follows: Vec<Follow>,
    /// The errors cel-go's visitor reports on the tree (literals, reserved names, macros):
    /// no syntax errors, so they neither stop the parse nor count as recoveries.
    visitor: Vec<SyntaxError>,
}

fn span(start: usize, end: usize) -> Span {
    // Sources are at most MAX_CODE_POINTS characters, so offsets fit u32.
    Span {
        start: start as u32,
        end: end as u32,
    }
}

impl Parser<'_> {
    // ---- tokens ----

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].kind
    }

    /// The ANTLR type of the token `k` ahead (1 is the current one); past the end, `EOF`.
    fn la(&self, k: usize) -> u32 {
        self.tokens
            .get(self.pos + k - 1)
            .map_or(ty::EOF, |t| type_of(&t.kind))
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

    /// Consumes the current token (never the end).
    fn consume(&mut self) -> Token {
        let t = self.tokens[self.pos].clone();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    /// Consumes a token the grammar expects here: ANTLR's `ReportMatch` ends error recovery.
    fn bump(&mut self) -> Token {
        self.recovering = false;
        self.last_error = None;
        self.consume()
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    /// The token at `i` as ANTLR's `GetTokenErrorDisplay` shows it.
    fn display(&self, i: usize) -> String {
        match self.tokens.get(i) {
            Some(t) if t.kind != Tok::Eof => quote(self.src.get(t.start..t.end).unwrap_or("")),
            _ => "'<EOF>'".into(),
        }
    }

    fn error_at(&self, i: usize, message: String) -> SyntaxError {
        SyntaxError {
            offset: self.tokens.get(i).map_or(self.src.len(), |t| t.start),
            message: format!("Syntax error: {message}"),
        }
    }

    /// Records an error of cel-go's visitor at `at`; the node it stands for is a placeholder.
    fn visitor_error(&mut self, at: usize, message: impl Into<String>) -> PResult {
        self.visitor.push(SyntaxError {
            offset: at,
            message: message.into(),
        });
        Ok(placeholder(at))
    }

    // ---- ANTLR's error strategy ----

    /// Runs a rule invoked where `follow` may come after it.
    fn with<T>(&mut self, follow: Follow, rule: impl FnOnce(&mut Self) -> T) -> T {
        self.follows.push(follow);
        let out = rule(self);
        self.follows.pop();
        out
    }

    /// What may follow here with the rules being parsed (ANTLR's `NextTokens` in context).
    fn in_context(&self, local: Follow) -> TokSet {
        let mut set = local.set;
        if !local.nullable {
            return set;
        }
        for f in self.follows.iter().rev() {
            set = set.union(f.set);
            if !f.nullable {
                return set;
            }
        }
        set.with(ty::EOF)
    }

    /// ANTLR's `GetErrorRecoverySet`: what may follow any rule being parsed.
    fn recovery_set(&self) -> TokSet {
        self.follows
            .iter()
            .fold(TokSet::default(), |s, f| s.union(f.set))
    }

    /// Reports an error unless already recovering (ANTLR's `ReportError`).
    fn report(&mut self, e: SyntaxError) {
        if self.recovering {
            return;
        }
        self.recovering = true;
        self.errors.push(e);
    }

    /// cel-go's `checkAttempts`, before every recovery: the 31st reports that the limit is
    /// exceeded and ends the parse.
    fn attempt(&mut self) -> Result<(), Stop> {
        if self.recoveries == RECOVERY_LIMIT {
            let e = self.error_at(
                self.pos,
                format!("error recovery attempt limit exceeded: {RECOVERY_LIMIT}"),
            );
            self.errors.push(e);
            return Err(Stop::Aborted);
        }
        self.recoveries += 1;
        Ok(())
    }

    /// Skips one token during a recovery, counted against cel-go's lookahead limit.
    fn skip(&mut self, skipped: &mut usize) -> Result<(), Stop> {
        if *skipped >= RECOVERY_LOOKAHEAD_LIMIT {
            return Err(Stop::Fatal(SyntaxError {
                offset: NO_LOCATION,
                message: format!(
                    "error recovery token lookahead limit exceeded: {RECOVERY_LOOKAHEAD_LIMIT}"
                ),
            }));
        }
        *skipped += 1;
        self.consume();
        Ok(())
    }

    /// ANTLR's `Recover`: skip to a token that may follow a rule being parsed.
    fn recover(&mut self, site: Site) -> Result<(), Stop> {
        self.attempt()?;
        let mut skipped = 0;
        if let Some((at, sites)) = &self.last_error {
            if *at == self.pos && sites.contains(&site) {
                self.skip(&mut skipped)?;
            }
        }
        match &mut self.last_error {
            Some((at, sites)) if *at == self.pos => sites.push(site),
            _ => self.last_error = Some((self.pos, vec![site])),
        }
        let set = self.recovery_set();
        while self.la(1) != ty::EOF && !set.has(self.la(1)) {
            self.skip(&mut skipped)?;
        }
        Ok(())
    }

    /// What a rule returns after recovering from `stop`, or `stop` itself when it is no
    /// recognition error.
    fn caught(&mut self, result: PResult, site: Site, start: usize) -> PResult {
        match result {
            Err(Stop::Recognition(e)) => {
                self.report(e);
                self.recover(site)?;
                Ok(placeholder(start))
            }
            other => other,
        }
    }

    /// ANTLR's `Match` of a token of type `t`, after which `after` may come: on a mismatch,
    /// single-token deletion, else insertion, else `mismatched input`. Returns the token
    /// matched (`None` for one taken as missing).
    fn expect(&mut self, t: u32, after: Follow) -> Result<Option<Token>, Stop> {
        if self.la(1) == t {
            return Ok(Some(self.bump()));
        }
        self.attempt()?;
        let wanted = TokSet::of(&[t]);
        if self.la(2) == t {
            let e = self.error_at(
                self.pos,
                format!(
                    "extraneous input {} expecting {}",
                    self.display(self.pos),
                    wanted.describe()
                ),
            );
            self.report(e);
            let mut skipped = 0;
            self.skip(&mut skipped)?;
            return Ok(Some(self.bump()));
        }
        if self.in_context(after).has(self.la(1)) {
            let e = self.error_at(
                self.pos,
                format!(
                    "missing {} at {}",
                    wanted.describe(),
                    self.display(self.pos)
                ),
            );
            self.report(e);
            return Ok(None);
        }
        Err(Stop::Recognition(self.mismatched(wanted)))
    }

    fn mismatched(&self, expected: TokSet) -> SyntaxError {
        self.error_at(
            self.pos,
            format!(
                "mismatched input {} expecting {}",
                self.display(self.pos),
                expected.describe()
            ),
        )
    }

    /// ANTLR's `Sync` at the start of a block whose alternatives begin with `set` (and that
    /// cannot be skipped): single-token deletion, else `mismatched input`. Nothing is checked
    /// while recovering.
    fn sync(&mut self, set: TokSet) -> Result<(), Stop> {
        if self.recovering || set.has(self.la(1)) {
            return Ok(());
        }
        if set.has(self.la(2)) {
            let e = self.error_at(
                self.pos,
                format!(
                    "extraneous input {} expecting {}",
                    self.display(self.pos),
                    set.describe()
                ),
            );
            self.report(e);
            self.consume();
            self.recovering = false;
            self.last_error = None;
            return Ok(());
        }
        Err(Stop::Recognition(self.mismatched(set)))
    }

    /// ANTLR's `Sync` at the back of a `+` loop, which may go round again with `set`: an
    /// unwanted token is reported and skipped with what follows it up to one of `set` or of
    /// the recovery set; parsing goes on.
    fn sync_loop_back(&mut self, set: TokSet) {
        if self.recovering || set.has(self.la(1)) {
            return;
        }
        let e = self.error_at(
            self.pos,
            format!(
                "extraneous input {} expecting {}",
                self.display(self.pos),
                set.describe()
            ),
        );
        self.report(e);
        // Not a recovery: cel-go's lookahead limit counts only what `Recover` and
        // `RecoverInline` skip.
        let stop = set.union(self.recovery_set());
        while self.la(1) != ty::EOF && !stop.has(self.la(1)) {
            self.consume();
        }
    }

    /// A prediction that read from token `from` and found no alternative at token `at`:
    /// ANTLR quotes the source between them (hidden text included, to the end for `EOF`), and
    /// the input stays at `from`. cel-go rewords one for a literal keyword after a dot.
    fn no_viable(&self, from: usize, at: usize) -> Stop {
        let first = &self.tokens[from];
        let text = if first.kind == Tok::Eof {
            "<EOF>"
        } else {
            let end = match self.tokens.get(at) {
                Some(t) if t.kind != Tok::Eof => t.end,
                _ => self.src.len(),
            };
            self.src.get(first.start..end).unwrap_or("")
        };
        // cel-go's `reservedIdentifier` regexp `'.(true|false|null)'` (parser.go).
        let keyword = text
            .char_indices()
            .nth(1)
            .map(|(i, _)| &text[i..])
            .filter(|rest| matches!(*rest, "true" | "false" | "null"));
        let message = match keyword {
            Some(word) => format!("mismatched input '{word}' expecting IDENTIFIER"),
            None => format!("no viable alternative at input {}", quote(text)),
        };
        Stop::Recognition(self.error_at(at, message))
    }

    // ---- limits ----

    /// The nesting limit (brackets, calls, ternaries: cel-go's parse listener counting
    /// nested grammar rules), an error cel-go reports at no location.
    fn too_deep(&self) -> Stop {
        Stop::Fatal(SyntaxError {
            offset: NO_LOCATION,
            message: format!("expression recursion limit exceeded: {MAX_DEPTH}"),
        })
    }

    /// Builds a node whose children have the given depths. More than [`MAX_DEPTH`] counted
    /// nodes on one path is what cel-go's AST visitor refuses (`max recursion depth exceeded`,
    /// at no location: parser.go `checkAndIncrementRecursionDepth`, reported by `parse` as an
    /// internal error); a tree deeper than [`MAX_TREE_DEPTH`] is celgate's own refusal.
    fn node(&self, kind: ExprKind, sp: Span, pos: usize, child: Depth, visit: Visit) -> NResult {
        let depth = Depth {
            tree: child.tree + 1,
            visitor: child.visitor + u32::from(visit == Visit::Counted),
        };
        if depth.visitor > MAX_DEPTH {
            return Err(SyntaxError {
                offset: NO_LOCATION,
                message: "max recursion depth exceeded".into(),
            });
        }
        if depth.tree > MAX_TREE_DEPTH {
            return Err(SyntaxError {
                offset: NO_LOCATION,
                message: format!("expression tree deeper than {MAX_TREE_DEPTH} nodes"),
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

    /// A global call or operator `func`.
    fn call(
        &self,
        func: &str,
        args: Vec<(Expr, Depth)>,
        sp: Span,
        pos: usize,
        visit: Visit,
    ) -> PResult {
        let depth = Depth::deepest(args.iter().map(|a| &a.1));
        let args = args.into_iter().map(|a| a.0).collect();
        let kind = ExprKind::Call {
            func: func.to_string(),
            target: None,
            args,
        };
        Ok(self.node(kind, sp, pos, depth, visit)?)
    }

    // ---- rules ----

    /// `start: expr EOF`.
    fn start_rule(&mut self) -> Result<Expr, Stop> {
        let e = self.with(Follow::then(&[ty::EOF]), |p| p.expr(0))?;
        if let Err(stop) = self.expect(ty::EOF, RULE_END) {
            let start = self.start();
            self.caught(Err(stop), Site::Start, start)?;
        }
        Ok(e.0)
    }

    /// `expr: conditionalOr ('?' conditionalOr ':' expr)?`; `nesting` counts open brackets,
    /// calls and ternaries, which are the parser's own recursion.
    fn expr(&mut self, nesting: u32) -> PResult {
        if nesting >= MAX_DEPTH {
            return Err(self.too_deep());
        }
        let start = self.start();
        let result = self.expr_body(nesting);
        self.caught(result, Site::Expr, start)
    }

    fn expr_body(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let cond = self.with(Follow::or_end(&[ty::QUESTION]), |p| {
            p.logical(nesting, true)
        })?;
        let question = self.start();
        if !self.eat(&Tok::Question) {
            return Ok(cond);
        }
        let yes = self.with(Follow::then(&[ty::COLON]), |p| p.logical(nesting + 1, true))?;
        self.expect(ty::COLON, Follow::set(EXPR_FIRST))?;
        let no = self.with(RULE_END, |p| p.expr(nesting + 1))?;
        let sp = span(start, self.prev_end());
        self.call("_?_:_", vec![cond, yes, no], sp, question, Visit::Counted)
    }

    /// `||` (when `or`) or `&&` chains, built as balanced trees as cel-go does, so a long
    /// chain stays shallow.
    fn logical(&mut self, nesting: u32, or: bool) -> PResult {
        let (op_tok, func, follow) = if or {
            (Tok::OrOr, "_||_", Follow::or_end(&[ty::OR]))
        } else {
            (Tok::AndAnd, "_&&_", Follow::or_end(&[ty::AND]))
        };
        let term = |p: &mut Self| {
            p.with(follow, |p| {
                if or {
                    p.logical(nesting, false)
                } else {
                    p.relation(nesting)
                }
            })
        };
        let first = term(self)?;
        if self.peek() != &op_tok {
            return Ok(first);
        }
        let mut terms = vec![Some(first)];
        let mut ops = Vec::new();
        while self.peek() == &op_tok {
            ops.push(self.start());
            self.bump();
            terms.push(Some(term(self)?));
        }
        self.balance(func, &mut terms, &ops, 0, ops.len() - 1)
    }

    /// The balanced tree cel-go builds over `terms[lo..=hi + 1]` joined by `ops[lo..=hi]`:
    /// the middle operator `(lo + hi + 1) / 2` is the root, so both the tree's shape and each
    /// node's position (its operator token) are cel-go's. Recursion is logarithmic.
    fn balance(
        &self,
        func: &str,
        terms: &mut [Option<(Expr, Depth)>],
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
            return Err(Stop::Fatal(SyntaxError {
                offset: NO_LOCATION,
                message: "unbalanced operator chain".into(),
            }));
        };
        let sp = span(l.0.span.start as usize, r.0.span.end as usize);
        self.call(func, vec![l, r], sp, ops[mid], Visit::Uncounted)
    }

    fn relation(&mut self, nesting: u32) -> PResult {
        // The operators may also end the relation: the FOLLOW of an operand is nullable.
        let operand = |p: &mut Self| {
            p.with(
                Follow {
                    set: RELATION_OPS,
                    nullable: true,
                },
                |p| p.additive(nesting),
            )
        };
        let mut lhs = operand(self)?;
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
            let rhs = operand(self)?;
            let sp = span(lhs.0.span.start as usize, rhs.0.span.end as usize);
            lhs = self.call(func, vec![lhs, rhs], sp, at, Visit::Counted)?;
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
            lhs = self.call(func, vec![lhs, rhs], sp, at, Visit::Counted)?;
        }
    }

    fn multiplicative(&mut self, nesting: u32) -> PResult {
        let operand = |p: &mut Self| {
            p.with(
                Follow {
                    set: CALC_OPS,
                    nullable: true,
                },
                |p| p.unary(nesting),
            )
        };
        let mut lhs = operand(self)?;
        loop {
            let func = match self.peek() {
                Tok::Star => "_*_",
                Tok::Slash => "_/_",
                Tok::Percent => "_%_",
                _ => return Ok(lhs),
            };
            let at = self.bump().start;
            let rhs = operand(self)?;
            let sp = span(lhs.0.span.start as usize, rhs.0.span.end as usize);
            lhs = self.call(func, vec![lhs, rhs], sp, at, Visit::Counted)?;
        }
    }

    /// `unary: member | '!'+ member | '-'+ member`. As in cel-go, an even run of the same
    /// operator cancels out, and one `-` directly before a number is the literal's sign (so
    /// `-9223372036854775808` parses).
    fn unary(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let result = self.unary_body(nesting);
        self.caught(result, Site::Unary, start)
    }

    fn unary_body(&mut self, nesting: u32) -> PResult {
        self.sync(EXPR_FIRST)?;
        if !EXPR_FIRST.has(self.la(1)) {
            // Only while recovering (`sync` let it through): `unary`'s prediction fails.
            return Err(self.no_viable(self.pos, self.pos));
        }
        let start = self.start();
        let op = self.peek().clone();
        if op != Tok::Not && op != Tok::Minus {
            return self.with(RULE_END, |p| p.member(nesting));
        }
        let again = MEMBER_FIRST.with(type_of(&op));
        let mut count = 0u32;
        while self.peek() == &op {
            self.bump();
            count += 1;
            self.sync_loop_back(again);
        }
        if op == Tok::Minus
            && count == 1
            && matches!(self.peek(), Tok::Int(_) | Tok::IntOverflow | Tok::Double(_))
        {
            return self.signed_number(start, nesting);
        }
        let operand = self.with(RULE_END, |p| p.member(nesting))?;
        if count.is_multiple_of(2) {
            return Ok(operand);
        }
        let func = if op == Tok::Not { "!_" } else { "-_" };
        let sp = span(start, self.prev_end());
        self.call(func, vec![operand], sp, start, Visit::Uncounted)
    }

    fn signed_number(&mut self, start: usize, nesting: u32) -> PResult {
        let tok = self.bump();
        let lit_node = self.signed_literal(start, tok)?;
        self.member_suffixes(lit_node, nesting)
    }

    /// The literal `-` (at `start`) and the number `tok`.
    fn signed_literal(&mut self, start: usize, tok: Token) -> PResult {
        let lit = match tok.kind {
            Tok::Int(v) if v <= (i64::MAX as u64) + 1 => {
                Literal::Int((v as i128).wrapping_neg() as i64)
            }
            Tok::Double(d) if d.is_finite() => Literal::Double(-d),
            Tok::Double(_) => return self.visitor_error(start, INVALID_DOUBLE),
            _ => return self.visitor_error(start, "invalid int literal"),
        };
        Ok((
            Expr {
                span: span(start, tok.end),
                pos: start as u32,
                kind: ExprKind::Literal(lit),
            },
            Depth::LEAF,
        ))
    }

    /// `member: primary ('.' '?'? IDENTIFIER | '.' IDENTIFIER '(' exprList? ')' |
    /// '[' '?'? expr ']')*`.
    fn member(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let result = self.member_body(nesting);
        self.caught(result, Site::Member, start)
    }

    fn member_body(&mut self, nesting: u32) -> PResult {
        let primary = self.with(MEMBER_END, |p| p.primary(nesting))?;
        self.member_suffixes(primary, nesting)
    }

    /// `.field`, `.?field`, `.method(args)`, `[index]`, `[?index]` after a primary.
    fn member_suffixes(&mut self, mut operand: (Expr, Depth), nesting: u32) -> PResult {
        let start = operand.0.span.start as usize;
        loop {
            match self.peek() {
                Tok::Dot => {
                    let dot_at = self.pos;
                    let next = self.tokens.get(self.pos + 1).map(|t| &t.kind);
                    let optional = next == Some(&Tok::Question);
                    if !optional && self.la(2) != ty::IDENTIFIER {
                        // Neither a select nor a call: the loop's prediction fails on the
                        // token after the dot.
                        return Err(self.no_viable(dot_at, dot_at + 1));
                    }
                    let dot = self.bump().start;
                    if optional {
                        self.bump();
                    }
                    let quoted = matches!(self.peek(), Tok::QuotedIdent(_));
                    let name = match self.expect(ty::IDENTIFIER, MEMBER_END)? {
                        Some(t) => ident_name(&t.kind),
                        None => String::new(),
                    };
                    if !optional && !quoted && self.peek() == &Tok::LParen {
                        let open = self.start();
                        let args = self.arguments(nesting, MEMBER_END)?;
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
                        operand = self.node(kind, sp, dot, depth, Visit::Counted)?;
                    }
                }
                Tok::LBracket => {
                    let bracket = self.bump().start;
                    self.sync(EXPR_FIRST.with(ty::QUESTION))?;
                    let optional = self.eat(&Tok::Question);
                    let index =
                        self.with(Follow::then(&[ty::RBRACKET]), |p| p.expr(nesting + 1))?;
                    self.expect(ty::RBRACKET, MEMBER_END)?;
                    let sp = span(start, self.prev_end());
                    let depth = operand.1.max(index.1);
                    let kind = ExprKind::Index {
                        operand: Box::new(operand.0),
                        index: Box::new(index.0),
                        optional,
                    };
                    operand = self.node(kind, sp, bracket, depth, Visit::Counted)?;
                }
                _ => return Ok(operand),
            }
        }
    }

    /// `'(' exprList? ')'` of a call, `after` what may follow the `)`.
    fn arguments(&mut self, nesting: u32, after: Follow) -> Result<Vec<(Expr, Depth)>, Stop> {
        self.expect(ty::LPAREN, Follow::set(EXPR_FIRST.with(ty::RPAREN)))?;
        let mut args = Vec::new();
        self.sync(EXPR_FIRST.with(ty::RPAREN))?;
        if EXPR_FIRST.has(self.la(1)) {
            self.with(Follow::then(&[ty::RPAREN]), |p| -> Result<(), Stop> {
                loop {
                    args.push(p.with(Follow::or_end(&[ty::COMMA]), |p| p.expr(nesting + 1))?);
                    if !p.eat(&Tok::Comma) {
                        return Ok(());
                    }
                }
            })?;
        }
        self.expect(ty::RPAREN, after)?;
        Ok(args)
    }

    /// `primary`: a name or global call, `( expr )`, a list, map or message literal, or a
    /// literal.
    fn primary(&mut self, nesting: u32) -> PResult {
        let start = self.start();
        let result = self.primary_body(nesting);
        self.caught(result, Site::Primary, start)
    }

    fn primary_body(&mut self, nesting: u32) -> PResult {
        self.sync(MEMBER_FIRST)?;
        let start = self.start();
        if self.peek() == &Tok::Dot && self.la(2) != ty::IDENTIFIER {
            return Err(self.no_viable(self.pos, self.pos + 1));
        }
        if self.peek() == &Tok::Minus {
            // The sign of a number literal, where a member begins (after `!`: `!-1`).
            if !matches!(self.la(2), ty::NUM_INT | ty::NUM_FLOAT) {
                return Err(self.no_viable(self.pos, self.pos + 1));
            }
            let start = self.bump().start;
            let tok = self.bump();
            return self.signed_literal(start, tok);
        }
        if !MEMBER_FIRST.has(self.la(1)) {
            // Only while recovering (`sync` let it through): the prediction finds nothing.
            return Err(self.no_viable(self.pos, self.pos));
        }
        let tok = self.bump();
        let lit = |l: Literal| -> PResult {
            Ok((
                Expr {
                    span: span(tok.start, tok.end),
                    pos: tok.start as u32,
                    kind: ExprKind::Literal(l),
                },
                Depth::LEAF,
            ))
        };
        match tok.kind.clone() {
            Tok::Int(v) => match i64::try_from(v) {
                Ok(v) => lit(Literal::Int(v)),
                Err(_) => self.visitor_error(start, "invalid int literal"),
            },
            Tok::IntOverflow => self.visitor_error(start, "invalid int literal"),
            Tok::UintOverflow => self.visitor_error(start, "invalid uint literal"),
            Tok::Uint(v) => lit(Literal::Uint(v)),
            // Go's ParseFloat refuses a literal beyond the largest double (cel-go keeps
            // its error); Rust's gives infinity.
            Tok::Double(d) if d.is_finite() => lit(Literal::Double(d)),
            Tok::Double(_) => self.visitor_error(start, INVALID_DOUBLE),
            Tok::Str(s) => lit(Literal::String(s)),
            Tok::Bytes(b) => lit(Literal::Bytes(b)),
            Tok::True => lit(Literal::Bool(true)),
            Tok::False => lit(Literal::Bool(false)),
            Tok::Null => lit(Literal::Null),
            Tok::LParen => {
                let inner = self.with(Follow::then(&[ty::RPAREN]), |p| p.expr(nesting + 1))?;
                self.expect(ty::RPAREN, RULE_END)?;
                Ok(inner)
            }
            Tok::LBracket => self.list(start, nesting),
            Tok::LBrace => self.map(start, nesting),
            Tok::Dot => {
                let name = self.bump();
                let before = self.visitor.len();
                let e = self.ident_or_call(ident_name(&name.kind), start, name.start, nesting)?;
                if let Tok::Reserved(w) = name.kind {
                    self.visitor.truncate(before);
                    return self.visitor_error(start, format!("reserved identifier: {w}"));
                }
                Ok(e)
            }
            // cel-go's visitor refuses the name and visits nothing under it.
            Tok::Reserved(w) => {
                let before = self.visitor.len();
                self.ident_or_call(w.to_string(), start, start, nesting)?;
                self.visitor.truncate(before);
                self.visitor_error(start, format!("reserved identifier: {w}"))
            }
            Tok::Ident(name) | Tok::QuotedIdent(name) => {
                self.ident_or_call(name, start, start, nesting)
            }
            // Every other token is outside MEMBER_FIRST.
            _ => Err(self.no_viable(self.pos - 1, self.pos - 1)),
        }
    }

    /// `name`, `name(args)` or `Name{...}`; `start` is where the expression starts (a leading
    /// dot), `at` the identifier.
    fn ident_or_call(&mut self, name: String, start: usize, at: usize, nesting: u32) -> PResult {
        if self.peek() == &Tok::LParen {
            let open = self.start();
            let args = self.arguments(nesting, RULE_END)?;
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
            while self.pos < k {
                self.bump();
            }
            return self.message(qualified, start, nesting);
        }
        let sp = span(start, self.prev_end());
        Ok(self.node(
            ExprKind::Ident(name),
            sp,
            at,
            Depth::default(),
            Visit::Uncounted,
        )?)
    }

    /// A message construction's `{fieldInitializerList? ','? '}'`, the name read.
    fn message(&mut self, type_name: String, start: usize, nesting: u32) -> PResult {
        let brace = self.bump().start;
        let mut fields = Vec::new();
        let mut depth = Depth::default();
        let begins_field = TokSet::of(&[ty::QUESTION, ty::IDENTIFIER]);
        self.sync(begins_field.union(TokSet::of(&[ty::COMMA, ty::RBRACE])))?;
        if begins_field.has(self.la(1)) {
            let result = self.with(Follow::then(&[ty::COMMA, ty::RBRACE]), |p| {
                p.field_initializers(nesting, &mut fields, &mut depth)
            });
            if let Err(stop) = result {
                let at = self.start();
                self.caught(Err(stop), Site::FieldInit, at)?;
            }
        }
        self.close_literal(ty::RBRACE)?;
        let sp = span(start, self.prev_end());
        let kind = ExprKind::Struct { type_name, fields };
        Ok(self.node(kind, sp, brace, depth, Visit::Uncounted)?)
    }

    /// `fieldInitializerList: optField ':' expr (',' optField ':' expr)*`.
    fn field_initializers(
        &mut self,
        nesting: u32,
        fields: &mut Vec<FieldInit>,
        depth: &mut Depth,
    ) -> Result<(), Stop> {
        loop {
            let field = self.with(Follow::then(&[ty::COLON]), |p| {
                let at = p.start();
                let result = p.opt_field();
                match result {
                    Err(stop) => p.caught(Err(stop), Site::OptField, at).map(|_| None),
                    Ok(f) => Ok(f),
                }
            })?;
            let colon = self.start();
            self.expect(ty::COLON, Follow::set(EXPR_FIRST))?;
            let (value, d) = self.with(Follow::or_end(&[ty::COMMA]), |p| p.expr(nesting + 1))?;
            *depth = (*depth).max(d);
            let (optional, name) = field.unwrap_or_default();
            fields.push(FieldInit {
                name,
                value,
                optional,
                pos: colon as u32,
            });
            let another = TokSet::of(&[ty::QUESTION, ty::IDENTIFIER]);
            if !(self.peek() == &Tok::Comma && another.has(self.la(2))) {
                return Ok(());
            }
            self.bump();
        }
    }

    /// `optField: '?'? IDENTIFIER`: whether optional, and the name.
    fn opt_field(&mut self) -> Result<Option<(bool, String)>, Stop> {
        self.sync(TokSet::of(&[ty::QUESTION, ty::IDENTIFIER]))?;
        let optional = self.eat(&Tok::Question);
        let name = self
            .expect(ty::IDENTIFIER, Follow::then(&[ty::COLON]))?
            .map_or_else(String::new, |t| ident_name(&t.kind));
        Ok(Some((optional, name)))
    }

    /// The `','? ']'` (or `'}'`) that ends a literal: the comma may be left out.
    fn close_literal(&mut self, close: u32) -> Result<(), Stop> {
        self.sync(TokSet::of(&[ty::COMMA, close]))?;
        self.eat(&Tok::Comma);
        self.expect(close, RULE_END)?;
        Ok(())
    }

    /// `'[' listInit? ','? ']'`, the `[` read.
    fn list(&mut self, start: usize, nesting: u32) -> PResult {
        let mut elements = Vec::new();
        let mut optional = Vec::new();
        let mut depth = Depth::default();
        let begins = EXPR_FIRST.with(ty::QUESTION);
        self.sync(begins.union(TokSet::of(&[ty::COMMA, ty::RBRACKET])))?;
        if begins.has(self.la(1)) {
            self.with(
                Follow::then(&[ty::COMMA, ty::RBRACKET]),
                |p| -> Result<(), Stop> {
                    loop {
                        let (opt, (e, d)) =
                            p.with(Follow::or_end(&[ty::COMMA]), |p| p.opt_expr(nesting))?;
                        depth = depth.max(d);
                        elements.push(e);
                        optional.push(opt);
                        if !(p.peek() == &Tok::Comma && begins.has(p.la(2))) {
                            return Ok(());
                        }
                        p.bump();
                    }
                },
            )?;
        }
        self.close_literal(ty::RBRACKET)?;
        let sp = span(start, self.prev_end());
        Ok(self.node(
            ExprKind::List { elements, optional },
            sp,
            start,
            depth,
            Visit::Uncounted,
        )?)
    }

    /// `optExpr: '?'? expr`.
    fn opt_expr(&mut self, nesting: u32) -> Result<(bool, (Expr, Depth)), Stop> {
        self.sync(EXPR_FIRST.with(ty::QUESTION))?;
        let opt = self.eat(&Tok::Question);
        let e = self.with(RULE_END, |p| p.expr(nesting + 1))?;
        Ok((opt, e))
    }

    /// `'{' mapInitializerList? ','? '}'`, the `{` read.
    fn map(&mut self, start: usize, nesting: u32) -> PResult {
        let mut entries = Vec::new();
        let mut depth = Depth::default();
        let begins = EXPR_FIRST.with(ty::QUESTION);
        self.sync(begins.union(TokSet::of(&[ty::COMMA, ty::RBRACE])))?;
        if begins.has(self.la(1)) {
            let result = self.with(Follow::then(&[ty::COMMA, ty::RBRACE]), |p| {
                p.map_initializers(nesting, &mut entries, &mut depth)
            });
            if let Err(stop) = result {
                let at = self.start();
                self.caught(Err(stop), Site::MapInit, at)?;
            }
        }
        self.close_literal(ty::RBRACE)?;
        let sp = span(start, self.prev_end());
        Ok(self.node(
            ExprKind::Map { entries },
            sp,
            start,
            depth,
            Visit::Uncounted,
        )?)
    }

    /// `mapInitializerList: optExpr ':' expr (',' optExpr ':' expr)*`.
    fn map_initializers(
        &mut self,
        nesting: u32,
        entries: &mut Vec<MapEntry>,
        depth: &mut Depth,
    ) -> Result<(), Stop> {
        let begins = EXPR_FIRST.with(ty::QUESTION);
        loop {
            let (optional, (key, kd)) =
                self.with(Follow::then(&[ty::COLON]), |p| p.opt_expr(nesting))?;
            self.expect(ty::COLON, Follow::set(EXPR_FIRST))?;
            let (value, vd) = self.with(Follow::or_end(&[ty::COMMA]), |p| p.expr(nesting + 1))?;
            *depth = (*depth).max(kd).max(vd);
            entries.push(MapEntry {
                key,
                value,
                optional,
            });
            if !(self.peek() == &Tok::Comma && begins.has(self.la(2))) {
                return Ok(());
            }
            self.bump();
        }
    }

    fn call_or_macro(
        &mut self,
        func: String,
        target: Option<(Expr, Depth)>,
        args: Vec<(Expr, Depth)>,
        sp: Span,
        open: usize,
    ) -> PResult {
        match self.expand_macro(&func, target.as_ref(), &args, sp, open) {
            Ok(Some(expanded)) => return Ok(expanded),
            Ok(None) => {}
            // The depth limit ends the parse; a misused macro is reported and parsing goes on.
            Err(e) if e.offset == NO_LOCATION => return Err(e.into()),
            Err(e) => return self.visitor_error(e.offset, e.message),
        }
        let depth = Depth::deepest(target.iter().chain(&args).map(|a| &a.1));
        // A member call is counted by cel-go's visitor, a global call is not.
        let visit = match target {
            Some(_) => Visit::Counted,
            None => Visit::Uncounted,
        };
        let target = target.map(|t| Box::new(t.0));
        let args = args.into_iter().map(|a| a.0).collect();
        Ok(self.node(
            ExprKind::Call { func, target, args },
            sp,
            open,
            depth,
            visit,
        )?)
    }

    fn expand_macro(
        &self,
        func: &str,
        target: Option<&(Expr, Depth)>,
        args: &[(Expr, Depth)],
        sp: Span,
        open: usize,
    ) -> Result<Option<(Expr, Depth)>, SyntaxError> {
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
                        Ok(Some(self.node(
                            kind,
                            sp,
                            open,
                            args[0].1,
                            Visit::Uncounted,
                        )?))
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
        let var_name = |a: &(Expr, Depth)| match &a.0.kind {
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
        // The macro's member call, counted by cel-go's visitor as it visits the call.
        let depth = Depth::deepest(
            [&target.1, &body.1]
                .into_iter()
                .chain(filter.as_ref().map(|f| &f.1)),
        );
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
            Visit::Counted,
        )?))
    }
}

/// What a rule that recovered from an error stands for: the parse fails anyway.
fn placeholder(at: usize) -> (Expr, Depth) {
    let expr = Expr {
        span: span(at, at),
        pos: at as u32,
        kind: ExprKind::Ident(String::new()),
    };
    (expr, Depth::LEAF)
}

/// The name a token read as an `IDENTIFIER` spells.
fn ident_name(t: &Tok) -> String {
    match t {
        Tok::Ident(s) | Tok::QuotedIdent(s) => s.clone(),
        Tok::Reserved(w) => (*w).to_string(),
        _ => String::new(),
    }
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
        // A member may begin with a number's sign (cel-go v0.22.0 CEL.g4 `literal`), not
        // with a negation: `!-1` parses, `!-x` does not.
        assert_eq!(p("!-1"), "!_(Int(-1))");
        assert_eq!(
            parse("!-x").unwrap_err().message(),
            "Syntax error: no viable alternative at input '-x'"
        );
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
        // In parentheses the inner recovery stops at once: the `?` may follow the outer
        // `conditionalOr` still being parsed. The `)` is then missing before it (unreported:
        // still recovering), the outer ternary takes the `?` and fails at the next one, and
        // that recovery (to the end) exceeds the limit.
        let enclosed = parse(&format!("({})", nested(100)))
            .unwrap_err()
            .to_string();
        let lines: Vec<&str> = enclosed
            .lines()
            .filter(|l| l.starts_with("ERROR"))
            .collect();
        assert_eq!(
            lines,
            [
                "ERROR: <input>:-1:0: error recovery token lookahead limit exceeded: 256",
                "ERROR: <input>:1:14: Syntax error: mismatched input '?' expecting ':'",
                "ERROR: <input>:1:21: Syntax error: mismatched input '?' expecting ':'",
            ]
        );
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
                format!(
                    "Syntax error: mismatched input ')' expecting {}",
                    EXPR_FIRST.describe()
                )
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

    /// Every issue of a failed parse as `line:column: message`.
    fn issues(src: &str) -> Vec<String> {
        parse(src)
            .unwrap_err()
            .issues
            .iter()
            .map(|i| format!("{}:{}: {}", i.line, i.column, i.message))
            .collect()
    }

    /// antlr4-go `error_strategy.go` `RecoverInline`: a token before the one a `match`
    /// expects is deleted (`extraneous`) and parsing goes on; a missing token before one
    /// that may follow it is inserted (`missing`); else `mismatched`.
    #[test]
    fn a_match_deletes_or_inserts_one_token_before_giving_up() {
        assert_eq!(
            issues("f(1 2)"),
            ["1:5: Syntax error: extraneous input '2' expecting ')'"]
        );
        assert_eq!(
            issues("a[(1] + [1 2]"),
            [
                "1:5: Syntax error: missing ')' at ']'",
                "1:12: Syntax error: extraneous input '2' expecting {']', ','}"
            ]
        );
        assert_eq!(
            issues("x ? 1 2 : 3"),
            ["1:7: Syntax error: extraneous input '2' expecting ':'"]
        );
        assert_eq!(
            issues("(1 2 3)"),
            ["1:4: Syntax error: mismatched input '2' expecting ')'"]
        );
    }

    /// cel_parser.go: every rule catches its errors (`errorExit`), reports, skips to a token
    /// that may follow a rule being parsed (`GetErrorRecoverySet`) and returns; the rules
    /// around it go on and report the next error once a token matched again.
    #[test]
    fn parsing_goes_on_after_a_recovery_and_reports_the_next_error() {
        assert_eq!(
            issues("f(1 2 3) + x."),
            [
                "1:5: Syntax error: mismatched input '2' expecting ')'",
                "1:14: Syntax error: no viable alternative at input '.'"
            ]
        );
        // Nothing is reported while recovering: the `)` missing before `+` is not.
        assert_eq!(
            issues("[1 2 3] + (1 2 3 + 4"),
            [
                "1:4: Syntax error: mismatched input '2' expecting {']', ','}",
                "1:14: Syntax error: mismatched input '2' expecting ')'"
            ]
        );
    }

    /// `Sync` at a block start deletes one token when the next one may begin the block; a
    /// `+` loop's back (`'!'+`, `'-'+`) reports an unwanted token and skips on.
    #[test]
    fn a_block_start_deletes_a_stray_token() {
        let first = EXPR_FIRST.describe();
        assert_eq!(
            issues("1 + * 2"),
            [format!(
                "1:5: Syntax error: extraneous input '*' expecting {first}"
            )]
        );
        // After `!`: another `!` or a member, which may begin with a number's `-`.
        assert_eq!(
            issues("!*1"),
            [format!(
                "1:2: Syntax error: extraneous input '*' expecting {first}"
            )]
        );
        // That skip is no recovery: cel-go's lookahead limit does not count it.
        let first_only = issues(&format!("!{}1", ")".repeat(300)));
        assert_eq!(first_only.len(), 1, "{first_only:?}");
        assert!(first_only[0].starts_with("1:2: Syntax error: extraneous input ')'"));
        assert_eq!(
            issues("-!1"),
            ["1:2: Syntax error: extraneous input '!' expecting {'[', '{', '(', '.', '-', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"]
        );
        assert_eq!(
            issues("f(* 1)"),
            ["1:3: Syntax error: extraneous input '*' expecting {'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"]
        );
    }

    /// `ReportNoViableAlternative` quotes the input from the decision's first token to the
    /// offending one, hidden text included, escaped by `escapeWSAndQuote`; a leading dot not
    /// followed by a name is such a failed prediction too.
    #[test]
    fn no_viable_alternative_quotes_the_text_read_across_lines() {
        assert_eq!(
            issues("a.\n)"),
            ["2:1: Syntax error: no viable alternative at input '.\\n)'"]
        );
        assert_eq!(
            issues("a. // c\n"),
            ["2:1: Syntax error: no viable alternative at input '. // c\\n'"]
        );
        assert_eq!(
            issues(".(1)"),
            ["1:2: Syntax error: no viable alternative at input '.('"]
        );
        // cel-go rewrites one for a literal keyword right after the dot only (parser.go).
        assert_eq!(
            issues("a. null"),
            ["1:4: Syntax error: no viable alternative at input '. null'"]
        );
        // A token's own line breaks are escaped where it is quoted.
        assert_eq!(
            issues("1 '''a\nb'''"),
            ["1:3: Syntax error: extraneous input ''''a\\nb'''' expecting <EOF>"]
        );
    }

    /// cel-go's `recoveryLimitErrorStrategy.checkAttempts` (parser.go): the 31st recovery
    /// reports that the limit is exceeded, at the current token, and ends the parse.
    #[test]
    fn recoveries_stop_at_cel_go_attempt_limit() {
        // The 31st `f(1 2)` starts at byte 241: its `2` is column 246.
        let src = format!("[{}]", vec!["f(1 2)"; 40].join(", "));
        let all = issues(&src);
        assert_eq!(all.len(), RECOVERY_LIMIT + 1);
        assert!(all[..RECOVERY_LIMIT]
            .iter()
            .all(|i| i.ends_with("extraneous input '2' expecting ')'")));
        assert_eq!(
            all[RECOVERY_LIMIT],
            "1:246: Syntax error: error recovery attempt limit exceeded: 30"
        );
    }

    /// cel-go's visitor reports its errors (bad literals, reserved names, misused macros)
    /// on the whole tree, beside the parser's: neither stops the other.
    #[test]
    fn visitor_errors_are_all_reported_with_the_syntax_errors() {
        assert_eq!(
            issues("[9223372036854775808, 18446744073709551616u]"),
            ["1:2: invalid int literal", "1:23: invalid uint literal"]
        );
        assert_eq!(
            issues("has(a) || has(b)"),
            [
                "1:5: invalid argument to has() macro",
                "1:15: invalid argument to has() macro"
            ]
        );
        assert_eq!(
            issues("if + (1 2)"),
            [
                "1:1: reserved identifier: if",
                "1:9: Syntax error: extraneous input '2' expecting ')'"
            ]
        );
        // Nothing under a reserved name is visited.
        assert_eq!(
            issues("if(9223372036854775808)"),
            ["1:1: reserved identifier: if"]
        );
    }

    /// Backquoted field names arrived with cel-go v0.23 (`ESCAPED_IDENTIFIER` in its
    /// CEL.g4; v0.22.0's has none): for Kubernetes 1.32 a backquote is unrecognized text and
    /// what is left parses on.
    #[test]
    fn backquoted_names_are_unrecognized_text_before_cel_go_v0_23() {
        assert!(parse_for("a.`b-c`", since::ESCAPED_IDENTIFIERS).is_ok());
        let e = parse_for("a.`b-c`", since::ESCAPED_IDENTIFIERS - 1).unwrap_err();
        let all: Vec<String> = e
            .issues
            .iter()
            .map(|i| format!("{}:{}: {}", i.line, i.column, i.message))
            .collect();
        assert_eq!(
            all,
            [
                "1:3: Syntax error: token recognition error at: '`'",
                "1:7: Syntax error: token recognition error at: '`'"
            ]
        );
    }

    /// parser.go `SyntaxError`: the listener stops the parse at its 101st report, which says
    /// so; cel-go shows 100 and counts the rest as truncated.
    #[test]
    fn reports_stop_at_cel_go_reporting_limit() {
        let e = parse(&"#".repeat(150)).unwrap_err();
        assert_eq!(e.issues.len(), 100);
        assert_eq!(e.truncated, 1);
        assert!(e.to_string().ends_with("\n1 more errors were truncated"));
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
