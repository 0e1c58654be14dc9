//! Regular expressions as cel-go runs them (Go's `regexp`, RE2 syntax): compiling a pattern
//! with Go's parse limits (`regexp/syntax/parse.go`: counts up to 1000, nesting up to 1000,
//! programs up to 128 MB, 32M runes) and Go's ASCII Perl classes, Go's error texts, and the
//! per-evaluation cache of patterns compiled at run time.
//!
//! Every pattern within Go's limits compiles, except a constant whose VM program would pass
//! [`CONSTANT_VM_LIMIT`] (a policy's constants are charged to no evaluation). Rust's automata work on UTF-8 bytes and build a
//! large Unicode class anew for each copy (`\pL{1000}`: 48 MB, seconds to build), so a
//! pattern whose automata would be large runs on [`super::regex_vm`], a VM over the pattern's
//! tree the size of Go's program.
//!
//! A constant pattern is compiled once, when the expression is compiled. A pattern that is a
//! run-time value (`c.name.matches(object.metadata.annotations.re)`) is compiled during the
//! evaluation, where its cost is cel-go's (⌈0.1·(1+size(string))⌉ · ⌈0.25·size(pattern)⌉,
//! charged before compiling) but its time and memory are ours: the automata only for a small
//! one (a compile of about 10 ms at most), what it will take counted against the memory
//! ceiling before it is built, the deadline looked at before each compile, and a cache per
//! evaluation that also keeps failures, so that each distinct pattern is compiled (or
//! refused) once.

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::meta;
use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{self, Class, Hir, HirKind};

use super::error::EvalError;
use super::meter::{Meter, Ticker};
use super::regex_flags;
use super::regex_vm::{Program, Unsupported, INST_BYTES};

/// A compiled pattern: `regex-automata`'s engines, or for a pattern whose automata would be
/// large, the VM that runs it as Go does ([`regex_vm`]).
#[derive(Debug)]
pub struct Regex(Engine);

#[derive(Debug)]
enum Engine {
    Automata(meta::Regex),
    Vm(Program),
}

impl Regex {
    /// Whether the pattern matches somewhere in `text`; the VM looks at the deadline.
    pub fn is_match(&self, text: &str, ticker: &mut Ticker) -> Result<bool, EvalError> {
        match &self.0 {
            Engine::Automata(re) => Ok(re.is_match(text)),
            Engine::Vm(vm) => vm.is_match(text, ticker),
        }
    }

    /// The leftmost-first match, as a byte range.
    pub fn find(
        &self,
        text: &str,
        ticker: &mut Ticker,
    ) -> Result<Option<std::ops::Range<usize>>, EvalError> {
        match &self.0 {
            Engine::Automata(re) => Ok(re.find(text).map(|m| m.range())),
            Engine::Vm(vm) => Ok(vm.find(text, ticker)?.map(|(s, e)| s..e)),
        }
    }

    /// The successive matches, as Go's `FindAll` takes them; `f` returns whether to go on.
    pub fn for_each_match(
        &self,
        text: &str,
        ticker: &mut Ticker,
        mut f: impl FnMut(std::ops::Range<usize>) -> Result<bool, EvalError>,
    ) -> Result<(), EvalError> {
        match &self.0 {
            Engine::Automata(re) => {
                for m in re.find_iter(text) {
                    if !f(m.range())? {
                        break;
                    }
                }
                Ok(())
            }
            Engine::Vm(vm) => vm.for_each_match(text, ticker, |s, e| f(s..e)),
        }
    }

    /// Whether it runs on the VM (for tests).
    pub fn on_vm(&self) -> bool {
        matches!(self.0, Engine::Vm(_))
    }
}

/// The longest pattern compiled at run time, in bytes. Go has no bound of its own on a
/// pattern's length (only on its program), so this one is ours: a parse cannot be
/// interrupted and takes about a microsecond per byte at worst, so 64 KiB keeps one to a few
/// milliseconds (the deadline is looked at before each). Go's size limit is reachable well
/// within it (`[a-z]{1000}` is 11 bytes for 1000 instructions).
pub const MAX_RUNTIME_PATTERN: usize = 64 << 10;

/// Go's `maxSize` (`regexp/syntax/parse.go`): a pattern whose compiled program would take
/// more than 128 MB of 40-byte instructions is `expression too large`.
const GO_MAX_SIZE: u64 = (128 << 20) / 40;

/// Go's `maxRunes`: the runes of all literals and class ranges (repetitions not copied) at
/// most 128 MB of 4-byte runes.
const GO_MAX_RUNES: u64 = (128 << 20) / 4;

/// Go's `maxHeight`: a parse tree at most 1000 deep (`expression nests too deeply`). Go counts
/// the leaf as well, so 999 nested groups around a literal are the deepest it accepts; Rust's
/// parser counts the groups.
const GO_MAX_NEST: u32 = GO_MAX_HEIGHT - 1;
const GO_MAX_HEIGHT: u32 = 1000;

/// The largest automaton built for a constant pattern, in estimated states ([`estimate`]):
/// about 16 MB. Rust's automata work on UTF-8 bytes, so a large Unicode class is built anew at
/// each place it is repeated (`\pL{1000}` is 1000 copies of `\pL`'s byte automaton, 48 MB
/// and seconds to build), where Go's program holds one instruction per copy: a larger
/// pattern runs on the VM, whose program is Go's size.
const MAX_CONSTANT_STATES: u64 = 1 << 20;

/// The largest automaton built for a pattern met at run time, in estimated states: building
/// costs 0.1 to 0.5 µs a state, so this keeps one compile to about 10 ms (`.{0,500}`,
/// `\w{1000}`, a 3,000-way alternation of short words fit; `\pL{10}` does not and runs on the
/// VM, compiled in microseconds).
pub const MAX_RUNTIME_STATES: u64 = 25_000;

/// The automaton's own bound, above the estimates (which are approximate).
const NFA_SIZE_LIMIT: usize = 64 << 20;

/// The most instructions of the VM's program for a run-time pattern: Go's bound with room
/// for the few places where the two programs differ in size. What the program and each
/// search take is counted against the evaluation's memory ceiling.
const VM_LIMIT: usize = 2 * GO_MAX_SIZE as usize;

/// The most instructions of a constant pattern's VM program, far below Go's 3,355,443: a
/// constant's program lives as long as its policy and is charged to no evaluation, and a
/// program of Go's size takes 80 MB, its search lists 200 MB more, so a few in a policy
/// would exceed the chart's 512 MiB. At 65,536 instructions the program is 1.5 MiB and one
/// search's lists at most 4 MiB (which each search still checks against the memory
/// ceiling). Past it, Go's `expression too large` at compile; the same pattern read at run
/// time is taken up to Go's limit, within the memory ceiling.
const CONSTANT_VM_LIMIT: usize = 1 << 16;

/// Go's largest count in `x{n,m}`, which is also the bound on the product of nested counts
/// (`maxRepeat` of `regexp/syntax`).
const GO_MAX_REPEAT: u32 = 1000;

/// The bytes a compiled run-time pattern is counted for against the memory ceiling: a fixed
/// part (the matcher's structures) and a part per estimated state.
const REGEX_BASE_BYTES: u64 = 4 << 10;
const REGEX_STATE_BYTES: u64 = 16;

/// Compiles a constant pattern (when the expression is compiled): Go's syntax limits and
/// error texts.
pub fn compile_regex(pattern: &str) -> Result<Regex, EvalError> {
    let hir = parse(pattern).map_err(EvalError::new)?;
    build(&hir, pattern, MAX_CONSTANT_STATES, CONSTANT_VM_LIMIT).map_err(EvalError::new)
}

/// Compiles a pattern met at run time, refusing one longer than [`MAX_RUNTIME_PATTERN`].
/// Returns the regex and the bytes it is counted for. (The cache compiles through its own
/// path; this is the tests' way in.)
#[cfg(test)]
fn compile_runtime_regex(pattern: &str) -> Result<(Regex, u64), EvalError> {
    let hir = parse_runtime(pattern)?;
    let bytes = runtime_bytes(&hir);
    Ok((
        build(&hir, pattern, MAX_RUNTIME_STATES, VM_LIMIT).map_err(EvalError::new)?,
        bytes,
    ))
}

fn parse_runtime(pattern: &str) -> Result<Hir, EvalError> {
    if pattern.len() > MAX_RUNTIME_PATTERN {
        return Err(EvalError::new(too_large(pattern)));
    }
    parse(pattern).map_err(EvalError::new)
}

/// The bytes a run-time pattern is counted for: its automaton's estimated states, or when it
/// runs on the VM, the VM's instructions (about Go's program size).
fn runtime_bytes(hir: &Hir) -> u64 {
    let states = estimate(hir);
    let per_part = if states > MAX_RUNTIME_STATES {
        go_size(hir).saturating_mul(INST_BYTES)
    } else {
        states.saturating_mul(REGEX_STATE_BYTES)
    };
    REGEX_BASE_BYTES.saturating_add(per_part)
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
    /// its estimated size counted against the memory ceiling before the automaton is built
    /// and [`Meter::regexes_compiled`] counted.
    pub fn get(&mut self, pattern: &str, meter: &mut Meter) -> Result<Arc<Regex>, EvalError> {
        if let Some(hit) = self.map.as_ref().and_then(|m| m.get(pattern)) {
            return hit.clone();
        }
        meter.check_deadline()?;
        meter.regexes_compiled += 1;
        meter.alloc(pattern.len() as u64)?;
        let result = match parse_runtime(pattern) {
            Ok(hir) => {
                // Within Go's limits: what it may take here is a matter for the memory
                // ceiling, not a compile error.
                meter.alloc(runtime_bytes(&hir))?;
                meter.check_deadline()?;
                build(&hir, pattern, MAX_RUNTIME_STATES, VM_LIMIT)
                    .map(Arc::new)
                    .map_err(EvalError::new)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            meter.alloc(e.message().len() as u64)?;
        }
        self.map
            .get_or_insert_with(HashMap::new)
            .insert(pattern.into(), result.clone());
        result
    }
}

/// Runs `f`, a recursion over a pattern's tree up to Go's 1000 levels (the automaton's compiler
/// takes a few frames a level), on a stack of its own unless the thread has plenty left.
fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(8 << 20, 16 << 20, f)
}

/// Go's `ErrLarge`, which quotes the whole pattern.
fn too_large(pattern: &str) -> String {
    format!("error parsing regexp: expression too large: `{pattern}`")
}

/// Parses `pattern` as Go's `regexp/syntax` would accept it, into the form to compile:
/// RE2 syntax, Go's limits on counted repetition, and `\d`, `\s`, `\w`, `\b` in ASCII (as
/// in Go; Rust's are Unicode). Errors carry Go's text.
fn parse(pattern: &str) -> Result<Hir, String> {
    // Go nests 1000 deep: the recursions over the tree (here and in the automaton's
    // compiler) get a stack of their own when the thread's runs low.
    with_stack(|| {
        let (mut ast, text) = parse_go_names(pattern)?;
        check_repeats(&ast, pattern)?;
        asciify(&mut ast);
        let hir = hir::translate::Translator::new()
            .translate(&text, &ast)
            .map_err(|e| go_translate_error(pattern, &e))?;
        if go_size(&hir) > GO_MAX_SIZE || go_runes(&hir) > GO_MAX_RUNES {
            return Err(too_large(pattern));
        }
        Ok(hir)
    })
}

/// Parses `pattern` into an AST with Go's rule for group names (regexp/syntax/parse.go
/// `parsePerlFlags` and `isValidCaptureName`): a name is one or more ASCII letters, digits
/// or `_`, may start with a digit and may repeat. The Rust parser refuses a leading digit
/// and a repeated name, and takes `.`, `[`, `]` and non-ASCII letters: a name Go takes and
/// Rust refuses is renamed in place to an unused name of the same length (names do not
/// change what matches, and offsets stay those of `pattern`) and the text parsed again; the
/// text parsed is returned with the AST. A name Go refuses is Go's error.
///
/// Flag groups are read first as Go reads them ([`regex_flags`]): one Go refuses is its
/// error unless the Rust parser found an error before it (Go stops at the first).
fn parse_go_names(pattern: &str) -> Result<(Ast, String), String> {
    let flags = regex_flags::go_flags(pattern);
    // Go's first error: the flag group's when it comes before the error found at `at`.
    let first = |at: usize, other: String| match &flags.error {
        Some((open, flag_error)) if *open <= at => flag_error.clone(),
        _ => other,
    };
    let mut text = flags.text.clone();
    // Each round renames one group, so there are at most as many rounds as groups.
    loop {
        let parsed = ast::parse::ParserBuilder::new()
            .nest_limit(GO_MAX_NEST)
            .build()
            .parse(&text);
        let e = match parsed {
            Ok(ast) => {
                go_check_names(pattern, &ast).map_err(|(at, e)| first(at, e))?;
                if let Some((_, flag_error)) = flags.error {
                    return Err(flag_error);
                }
                return Ok((ast, text));
            }
            Err(e) => e,
        };
        let Some(name) = go_valid_refused_name(&text, &e).map_err(|(at, e)| first(at, e))? else {
            // Go finds a group left open at the end of the pattern.
            let at = match e.kind() {
                ast::ErrorKind::GroupUnclosed => pattern.len(),
                _ => e.span().start.offset,
            };
            return Err(first(at, go_parse_error(pattern, &e)));
        };
        match unused_name(&text, name.len()) {
            Some(fresh) => text.replace_range(name, &fresh),
            None => return Err(go_parse_error(pattern, &e)),
        }
    }
}

/// Go's `isValidCaptureName`: one or more ASCII letters, digits or `_`.
fn go_valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// The byte range of the group name the Rust parser refused with `e` when Go takes it (a
/// name starting with a digit; a repeated name); `Ok(None)` for another error; Go's error
/// for a repeated name Go refuses (its first use is refused first).
fn go_valid_refused_name(
    text: &str,
    e: &ast::Error,
) -> Result<Option<std::ops::Range<usize>>, (usize, String)> {
    use regex_syntax::ast::ErrorKind as K;
    match e.kind() {
        K::GroupNameDuplicate { original } => {
            let span = e.span();
            let name = span.start.offset..span.end.offset;
            if go_valid_name(&text[name.clone()]) {
                return Ok(Some(name));
            }
            Err((
                original.start.offset,
                invalid_name(text, original.start.offset, original.end.offset),
            ))
        }
        K::GroupNameInvalid => {
            let at = e.span().start.offset;
            let Some(open) = text[..at].rfind("(?") else {
                return Ok(None);
            };
            let start = open
                + if text[open..].starts_with("(?P<") {
                    4
                } else {
                    3
                };
            let Some(len) = text[start..].find('>') else {
                return Ok(None);
            };
            let name = start..start + len;
            Ok(go_valid_name(&text[name.clone()]).then_some(name))
        }
        _ => Ok(None),
    }
}

/// Go's error for the group whose name spans `start..end`: it quotes the group's opening
/// through the `>`.
fn invalid_name(pattern: &str, start: usize, end: usize) -> String {
    let open = pattern[..start].rfind("(?").unwrap_or(start);
    let through = (end + 1).min(pattern.len());
    format!(
        "error parsing regexp: invalid named capture: `{}`",
        &pattern[open..through]
    )
}

/// A group name of `len` characters that `text` does not use (every name in a pattern is
/// written `<name>`); `None` when all of them are used.
fn unused_name(text: &str, len: usize) -> Option<String> {
    const CHARS: &[u8] = b"_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let base = CHARS.len() as u64;
    let limit = base.saturating_pow(len.min(10) as u32);
    (0..limit).find_map(|mut n| {
        let mut name = vec![b'_'; len];
        for slot in name.iter_mut().rev() {
            *slot = CHARS[(n % base) as usize];
            n /= base;
        }
        // Only ASCII was written.
        let name = String::from_utf8(name).ok()?;
        (!text.contains(&format!("<{name}>"))).then_some(name)
    })
}

/// Go's refusal of the first group name in `pattern` the Rust parser took but Go does not
/// (`.`, `[`, `]`, a non-ASCII letter), with the name's offset.
fn go_check_names(pattern: &str, ast: &Ast) -> Result<(), (usize, String)> {
    fn first_bad(ast: &Ast, pattern: &str, bad: &mut Option<(usize, usize)>) {
        match ast {
            Ast::Group(g) => {
                if let ast::GroupKind::CaptureName { name, .. } = &g.kind {
                    let (s, e) = (name.span.start.offset, name.span.end.offset);
                    let text = pattern.get(s..e).unwrap_or(&name.name);
                    if !go_valid_name(text) && bad.is_none_or(|(b, _)| s < b) {
                        *bad = Some((s, e));
                    }
                }
                first_bad(&g.ast, pattern, bad);
            }
            Ast::Repetition(r) => first_bad(&r.ast, pattern, bad),
            Ast::Alternation(a) => a.asts.iter().for_each(|x| first_bad(x, pattern, bad)),
            Ast::Concat(c) => c.asts.iter().for_each(|x| first_bad(x, pattern, bad)),
            _ => {}
        }
    }
    let mut bad = None;
    with_stack(|| first_bad(ast, pattern, &mut bad));
    match bad {
        Some((s, e)) => Err((s, invalid_name(pattern, s, e))),
        None => Ok(()),
    }
}

/// Go's `calcSize`: the instructions of the compiled program, a class or an assertion one,
/// a literal one per rune, `x{n,m}` m copies of x and a split per optional copy.
fn go_size(hir: &Hir) -> u64 {
    let size = match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(_) => 1,
        HirKind::Literal(l) => String::from_utf8_lossy(&l.0).chars().count() as u64,
        HirKind::Capture(c) => go_size(&c.sub).saturating_add(2),
        HirKind::Repetition(r) => {
            let sub = go_size(&r.sub);
            match r.max {
                None if r.min == 0 => sub.saturating_add(2),
                None => sub.saturating_mul(u64::from(r.min)).saturating_add(1),
                Some(max) => sub
                    .saturating_mul(u64::from(max))
                    .saturating_add(u64::from(max.saturating_sub(r.min))),
            }
        }
        HirKind::Concat(v) => v.iter().map(go_size).fold(0, u64::saturating_add),
        HirKind::Alternation(v) => v
            .iter()
            .map(go_size)
            .fold(v.len().saturating_sub(1) as u64, u64::saturating_add),
    };
    size.max(1)
}

/// Go's `numRunes`: the runes of the tree's literals and class ranges (two per range), a
/// repeated operand counted once.
fn go_runes(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(l) => String::from_utf8_lossy(&l.0).chars().count() as u64,
        HirKind::Class(Class::Unicode(c)) => 2 * c.ranges().len() as u64,
        HirKind::Class(Class::Bytes(c)) => 2 * c.ranges().len() as u64,
        HirKind::Capture(c) => go_runes(&c.sub),
        HirKind::Repetition(r) => go_runes(&r.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => {
            v.iter().map(go_runes).fold(0, u64::saturating_add)
        }
    }
}

/// Builds the matcher: the automata when their estimated size is within `max_states` (the
/// lazy DFA's cache as `regex::Regex::new` sets it), else the VM of at most `vm_limit`
/// instructions.
fn build(hir: &Hir, pattern: &str, max_states: u64, vm_limit: usize) -> Result<Regex, String> {
    with_stack(|| {
        if estimate(hir) <= max_states {
            let built = meta::Builder::new()
                .configure(
                    meta::Config::new()
                        .nfa_size_limit(Some(NFA_SIZE_LIMIT))
                        .hybrid_cache_capacity(2 << 20),
                )
                .build_from_hir(hir);
            match built {
                Ok(re) => return Ok(Regex(Engine::Automata(re))),
                Err(e) if e.size_limit().is_none() => {
                    return Err(format!("error parsing regexp: {e}"))
                }
                // Larger than estimated: the VM.
                Err(_) => {}
            }
        }
        match Program::new(hir, vm_limit) {
            Ok(vm) => Ok(Regex(Engine::Vm(vm))),
            Err(Unsupported::TooLarge) => Err(too_large(pattern)),
            Err(Unsupported::Look) => Err(format!(
                "error parsing regexp: invalid or unsupported Perl syntax: `{pattern}`"
            )),
        }
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
        // Go reads a bare `(?P<` or `(?<` at the end as flags, and stops at `P` or `<`.
        K::GroupNameUnexpectedEof if pattern.ends_with("(?P<") => {
            ("invalid or unsupported Perl syntax", "(?P")
        }
        K::GroupNameUnexpectedEof if pattern.ends_with("(?<") => {
            ("invalid or unsupported Perl syntax", "(?<")
        }
        K::GroupNameInvalid | K::GroupNameEmpty | K::GroupNameUnexpectedEof => (
            "invalid named capture",
            go_named_capture(pattern, span.start.offset).unwrap_or(fragment),
        ),
        // Go's flag loop quotes from the group's `(?` through the character it stopped at
        // (`(?P=a)` is `(?P`).
        K::FlagUnrecognized => (
            "invalid or unsupported Perl syntax",
            pattern
                .get(..span.start.offset)
                .and_then(|before| before.rfind("(?"))
                .and_then(|open| pattern.get(open..span.end.offset))
                .unwrap_or(fragment),
        ),
        K::GroupNameDuplicate { .. } => ("invalid named capture", fragment),
        K::NestLimitExceeded(_) => ("expression nests too deeply", pattern),
        _ => ("invalid or unsupported Perl syntax", fragment),
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

/// The text Go's `parsePerlFlags` (regexp/syntax/parse.go) quotes for a bad named group
/// whose error is found at `at`: the group's opening `(?P<name>` or `(?<name>` through the
/// first `>`, or, with no `>` left in the pattern, everything from the group's `(?` on.
fn go_named_capture(pattern: &str, at: usize) -> Option<&str> {
    let open = pattern.get(..at)?.rfind("(?")?;
    let rest = &pattern[open..];
    let named =
        (rest.len() > 4 && rest.starts_with("(?P<")) || (rest.len() > 3 && rest.starts_with("(?<"));
    if !named {
        return None;
    }
    Some(rest.find('>').map_or(rest, |end| &rest[..=end]))
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

    /// No pattern panics the reader of Go's flag groups, named groups and classes, or the
    /// compiler behind it: patterns made of the characters those readers branch on, with
    /// non-ASCII ones among them (a character split at a byte index panics).
    #[test]
    fn no_pattern_of_group_and_class_syntax_panics() {
        use proptest::prelude::*;
        let piece = prop::sample::select(vec![
            "(",
            ")",
            "(?",
            "(?P<",
            "(?P=",
            ">",
            ":",
            "-",
            "i",
            "m",
            "s",
            "U",
            "x",
            "u",
            "R",
            "[",
            "]",
            "[:alpha:]",
            "^",
            "\\",
            "\\Q",
            "\\E",
            "\\p{",
            "}",
            "é",
            "日",
            "\u{10ffff}",
            "a",
            "*",
            "+",
            "?",
            "{2}",
            "|",
            ".",
            "$",
        ]);
        let pattern = prop::collection::vec(piece, 0..24).prop_map(|p| p.concat());
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 4096,
            ..Default::default()
        });
        runner
            .run(&pattern, |p| {
                let _ = compile_regex(&p);
                let _ = compile_runtime_regex(&p);
                Ok(())
            })
            .unwrap();
    }
    use super::*;

    fn ticker() -> Ticker {
        Ticker::new(None, 1024)
    }

    fn is_match(pattern: &str, text: &str) -> bool {
        compile_regex(pattern)
            .unwrap()
            .is_match(text, &mut ticker())
            .unwrap()
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

    /// Go's `parsePerlFlags` (regexp/syntax/parse.go) quotes a bad name's whole group
    /// opening up to the first `>`, or the rest of the pattern when no `>` follows.
    #[test]
    fn named_capture_errors_quote_the_group_as_go_does() {
        let named = |f: &str| format!("error parsing regexp: invalid named capture: `{f}`");
        assert_eq!(error("(?P<>a)"), named("(?P<>"));
        assert_eq!(error("x(?<>a)"), named("(?<>"));
        assert_eq!(error("(?P<a b>c)"), named("(?P<a b>"));
        assert_eq!(error("(a)(?P<b"), named("(?P<b"));
        assert_eq!(error("(?<b-c"), named("(?<b-c"));
    }

    /// Go's `isValidCaptureName` (regexp/syntax/parse.go): ASCII letters, digits and `_`,
    /// a digit first included; `parsePerlFlags` does not refuse a repeated name.
    #[test]
    fn group_names_follow_gos_rule() {
        for p in [
            "(?P<1>a)",
            "(?P<1a>a)(?<9>b)",
            "(?P<a>x)(?P<a>y)",
            "(?<a>x)|(?<a>y)(?<a>z)",
        ] {
            assert!(compile_regex(p).is_ok(), "{p}: {}", error(p));
        }
        assert!(is_match("(?P<a>x)(?P<a>y)", "xy"));
        assert!(!is_match("(?P<a>x)(?P<a>y)", "xx"));
        assert!(is_match("^(?P<1>a+)(?P<_a>b)$", "aab"));
        let named = |f: &str| format!("error parsing regexp: invalid named capture: `{f}`");
        assert_eq!(error("(?P<a.b>c)"), named("(?P<a.b>"));
        assert_eq!(error("x(?<a[0]>c)"), named("(?<a[0]>"));
        assert_eq!(error("(?P<é>c)"), named("(?P<é>"));
        assert_eq!(error("(?P<aé>c)(?P<aé>d)"), named("(?P<aé>"));
        assert_eq!(error("(?P<ok>a)(?P<b.c>d)"), named("(?P<b.c>"));
    }

    /// Go's `parsePerlFlags` reads `(?P=a)` and a bare `(?P<` or `(?<` at the end as flags,
    /// and quotes what it read up to the character it refused.
    #[test]
    fn perl_group_forms_go_lacks_are_flag_errors() {
        let perl =
            |f: &str| format!("error parsing regexp: invalid or unsupported Perl syntax: `{f}`");
        assert_eq!(error("(?P<a>x)(?P=a)"), perl("(?P"));
        assert_eq!(error("(?P<"), perl("(?P"));
        assert_eq!(error("ab(?<"), perl("(?<"));
        assert_eq!(error("(?P>a)"), perl("(?P"));
    }

    /// Go's `parsePerlFlags` (regexp/syntax/parse.go) knows `i`, `m`, `s`, `U` only: Rust's
    /// `x`, `u`, `R` are refused in both group forms and after `-`, and Go's first error
    /// in reading order is the one reported (a group left open is found at the end).
    #[test]
    fn flags_go_lacks_are_refused_with_gos_text() {
        let perl =
            |f: &str| format!("error parsing regexp: invalid or unsupported Perl syntax: `{f}`");
        assert_eq!(error("(?x)a b"), perl("(?x"));
        assert_eq!(error("(?u:a)"), perl("(?u"));
        assert_eq!(error("x(?R)$"), perl("(?R"));
        assert_eq!(error("(?s-x:a)"), perl("(?s-x"));
        assert_eq!(error("(?i-)a"), perl("(?i-)"));
        assert_eq!(error("(?-i-m)a"), perl("(?-i-"));
        assert_eq!(error("a(?i"), perl("(?i"));
        assert_eq!(error("(a(?x)"), perl("(?x"));
        assert_eq!(
            error(r"\q(?x)"),
            "error parsing regexp: invalid escape sequence: `\\q`"
        );
        assert_eq!(error(r"(?x)\q"), perl("(?x"));
        assert_eq!(
            error("(?P<a.b>c)(?x)"),
            "error parsing regexp: invalid named capture: `(?P<a.b>`"
        );
        assert_eq!(error("(?x)(?P<a.b>c)"), perl("(?x"));
        assert!(compile_regex("[(?x)]").is_ok());
    }

    /// Go's flag loop takes a repeated flag (the last one decides) and an empty `(?)`.
    #[test]
    fn flag_groups_go_takes_and_rust_refuses_compile() {
        assert!(is_match("^(?ii)ab$", "AB"));
        assert!(!is_match("^(?i-i)ab$", "AB"));
        assert!(is_match("^(?i-i)ab$", "ab"));
        assert!(is_match("^(?ss:a.b)$", "a\nb"));
        assert!(is_match("^(?)a$", "a"));
        // A later error still quotes the pattern as written.
        assert_eq!(
            error("(?ii)a**"),
            "error parsing regexp: invalid nested repetition operator: `**`"
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

    /// Issue 24 item 8: patterns at Go's limits (`regexp/syntax/parse.go`) compile and match,
    /// at run time as well as constants.
    #[test]
    fn patterns_at_gos_limits_compile_and_match() {
        let letters = "é".repeat(1000);
        let nested = format!("{}a{}", "(".repeat(999), ")".repeat(999));
        let cases: Vec<(String, String, bool)> = vec![
            ("^[a-z]{1000}$".into(), "a".repeat(1000), true),
            ("^[a-z]{1000}$".into(), "a".repeat(999), false),
            (r"^\p{L}{500}$".into(), "é".repeat(500), true),
            (r"^\pL{1000}$".into(), letters.clone(), true),
            (r"^\pL{1000}$".into(), "é".repeat(999) + "1", false),
            (r"^(\p{L}|\d){300}$".into(), "é1".repeat(150), true),
            (r"^[\pL\pN]{100}$".into(), "a1".repeat(50), true),
            ("^((a{10}){10}){10}$".into(), "a".repeat(1000), true),
            (r"^\w{1000}$".into(), "_".repeat(1000), true),
            (".{1000}".into(), letters, true),
            // 999 groups around a leaf: Go's height 1000 (the anchors of `^...$` would add one).
            (nested, "a".into(), true),
        ];
        for (pattern, text, want) in cases {
            let re = compile_regex(&pattern).unwrap_or_else(|e| panic!("{pattern}: {e:?}"));
            assert_eq!(re.is_match(&text, &mut ticker()), Ok(want), "{pattern}");
            let (re, _) = compile_runtime_regex(&pattern).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(
                re.is_match(&text, &mut ticker()),
                Ok(want),
                "{pattern} at run time"
            );
        }
        // Beyond what the automata take here, still within Go's limits: the VM.
        let many = r"\pL{1000}".repeat(5);
        let re = compile_regex(&format!("^{many}$")).unwrap();
        assert!(re.on_vm());
        assert_eq!(re.is_match(&"é".repeat(5000), &mut ticker()), Ok(true));
        assert_eq!(re.is_match(&"é".repeat(4999), &mut ticker()), Ok(false));
        // Go's program size limit: 3,355,443 instructions (a run-time pattern; a constant's
        // VM is bounded lower, see `CONSTANT_VM_LIMIT`).
        let at_size = "[a-z]{1000}".repeat(3355);
        let (re, _) =
            compile_runtime_regex(&format!("^{at_size}$")).expect("3,355,000 instructions");
        assert!(re.on_vm());
        let text = "a".repeat(3_355_000);
        assert_eq!(re.is_match(&text, &mut ticker()), Ok(true));
        assert_eq!(re.is_match(&text[1..], &mut ticker()), Ok(false));
    }

    /// Reviewer item 3: a constant pattern's VM program is bounded far below Go's size, so
    /// that its program and one search's lists stay a few MiB; past it, Go's error text.
    #[test]
    fn a_constant_pattern_past_the_vm_bound_is_refused_at_compile() {
        let within = format!("^{}$", r"\pL{1000}".repeat(60));
        assert!(compile_regex(&within).expect("60,000 instructions").on_vm());
        let past = format!("^{}$", r"\pL{1000}".repeat(70));
        assert_eq!(
            compile_regex(&past).unwrap_err().message(),
            format!("error parsing regexp: expression too large: `{past}`")
        );
        // At run time, Go's size, its memory counted against the ceiling.
        assert!(compile_runtime_regex(&past).is_ok());
    }

    /// Reviewer item 3: a search's thread lists are counted against the memory ceiling
    /// before they are allocated.
    #[test]
    fn a_search_past_the_memory_ceiling_fails_with_the_memory_error() {
        let (re, _) = compile_runtime_regex(&"[a-z]{1000}".repeat(100)).unwrap();
        assert!(re.on_vm());
        let text = "a".repeat(100);
        let mut small = Ticker::new(None, 1024).with_memory_room(1 << 20);
        assert_eq!(
            re.is_match(&text, &mut small),
            Err(EvalError::memory_limit())
        );
        assert_eq!(re.find(&text, &mut small), Err(EvalError::memory_limit()));
        let mut roomy = Ticker::new(None, 1024).with_memory_room(64 << 20);
        assert_eq!(re.is_match(&text, &mut roomy), Ok(false));
    }

    /// Reviewer item 5: a run-time pattern is at most 64 KiB (one parse of a few ms).
    #[test]
    fn a_runtime_pattern_over_64_kib_is_refused() {
        assert!(compile_runtime_regex(&"a".repeat(64 << 10)).is_ok());
        let long = "a".repeat((64 << 10) + 1);
        assert_eq!(
            compile_runtime_regex(&long).unwrap_err().message(),
            format!("error parsing regexp: expression too large: `{long}`")
        );
    }

    /// Just past Go's limits: Go's error texts.
    #[test]
    fn patterns_past_gos_limits_are_refused_as_go_refuses_them() {
        assert_eq!(
            error("[a-z]{1001}"),
            "error parsing regexp: invalid repeat count: `{1001}`"
        );
        assert_eq!(
            error(r"(\pL{10}){101}"),
            "error parsing regexp: invalid repeat count: `{101}`"
        );
        let deep = format!("{}a{}", "(".repeat(1000), ")".repeat(1000));
        assert_eq!(
            error(&deep),
            format!("error parsing regexp: expression nests too deeply: `{deep}`")
        );
        let past_size = "[a-z]{1000}".repeat(3356);
        assert_eq!(
            parse(&past_size).unwrap_err(),
            format!("error parsing regexp: expression too large: `{past_size}`")
        );
        // Go's rune limit: 32M runes of literals and class ranges, `\pL` counted per instance.
        let per_class = go_runes(&parse(r"\pL").unwrap());
        let most = GO_MAX_RUNES / per_class;
        assert!(parse(&r"\pL".repeat(most as usize)).is_ok());
        let past = r"\pL".repeat(most as usize + 1);
        assert_eq!(
            parse(&past).unwrap_err(),
            format!("error parsing regexp: expression too large: `{past}`")
        );
    }

    /// The VM and the automata agree on what matches, where, and on the successive matches.
    #[test]
    fn the_vm_matches_as_the_automata_do() {
        let patterns = [
            "a",
            "a*",
            "a+?",
            "(a|ab)(c|bcd)(d*)",
            "a|b|",
            "(?:)",
            "x*",
            "(a*)*b",
            "^abc$",
            "(?m)^b$",
            r"\bfoo\b",
            r"\Bo",
            "(?i)straße",
            "[^a-c]+",
            "a{2,4}",
            "a{2,4}?",
            "(ab){2,}",
            ".*",
            "(?s).+",
            r"\d+\.\d*",
            "é+",
            "^",
            "$",
            "(a|b)*?c",
            "[[:alpha:]]+",
            r"\pL\pN?",
            "(?U)a+",
            "a??b",
        ];
        let texts = [
            "",
            "a",
            "aaa",
            "abcd",
            "xabcdx",
            "a\nb\nc",
            "foo bar",
            "foofoo",
            "STRASSE straße",
            "aabbab",
            "1.5 22. x",
            "éé a",
            "abab",
            "bbbc",
            "aab",
        ];
        for p in patterns {
            let hir = parse(p).unwrap();
            let automata = build(&hir, p, u64::MAX, VM_LIMIT).unwrap();
            let vm = Regex(Engine::Vm(Program::new(&hir, VM_LIMIT).unwrap()));
            assert!(!automata.on_vm());
            for text in texts {
                let all = |re: &Regex| {
                    let mut out = Vec::new();
                    re.for_each_match(text, &mut ticker(), |m| {
                        out.push(m);
                        Ok(true)
                    })
                    .unwrap();
                    out
                };
                assert_eq!(
                    vm.is_match(text, &mut ticker()),
                    automata.is_match(text, &mut ticker()),
                    "{p} in {text:?}"
                );
                assert_eq!(
                    vm.find(text, &mut ticker()),
                    automata.find(text, &mut ticker()),
                    "{p} in {text:?}"
                );
                assert_eq!(all(&vm), all(&automata), "{p} in {text:?}");
            }
        }
    }

    /// The VM looks at the deadline as it searches.
    #[test]
    fn the_vm_stops_at_the_deadline() {
        let re = compile_regex(&r"\pL{1000}".repeat(5)).unwrap();
        assert!(re.on_vm());
        let mut past = Ticker::new(Some(std::time::Instant::now()), 1024);
        let e = re.is_match(&"é".repeat(6000), &mut past).unwrap_err();
        assert_eq!(e.to_string(), "operation interrupted");
    }

    #[test]
    fn runtime_patterns_are_bounded_in_length() {
        assert!(compile_runtime_regex(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").is_ok());
        assert!(compile_runtime_regex(&["abc"; 3000].join("|")).is_ok());
        let long = "a".repeat(MAX_RUNTIME_PATTERN + 1);
        assert!(compile_runtime_regex(&long).is_err());
    }

    #[test]
    fn a_runtime_pattern_is_counted_against_the_memory_ceiling_before_it_is_built() {
        let mut cache = RegexCache::default();
        let mut meter = Meter {
            memory_limit: 1 << 20,
            ..Meter::default()
        };
        // 30,000 instructions on the VM.
        let e = cache
            .get(&"[a-z]{1000}".repeat(30), &mut meter)
            .unwrap_err();
        assert_eq!(e.to_string(), "operation cancelled: memory limit exceeded");
        assert_eq!(meter.regexes_compiled, 1);
        assert!(cache.get("a+", &mut meter).is_ok());
    }

    #[test]
    fn the_cache_compiles_each_pattern_once_failures_included() {
        let mut cache = RegexCache::default();
        let mut meter = Meter::default();
        for _ in 0..3 {
            assert!(cache.get("a+", &mut meter).is_ok());
            assert!(cache.get(r"\pL{1001}", &mut meter).is_err());
        }
        assert_eq!(meter.regexes_compiled, 2);
        assert!(meter.memory > 0);
    }
}
