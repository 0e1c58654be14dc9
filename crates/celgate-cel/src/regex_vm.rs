//! A Pike VM over a pattern's tree, the way Go's `regexp` runs its NFA
//! (`regexp/exec.go`): one instruction per class, its ranges shared by every copy of it, so a
//! pattern takes memory in proportion to Go's own program whatever its Unicode classes. The
//! automata of `regex-automata` work on UTF-8 bytes and build a large class anew for each
//! copy (`\pL{1000}` is 48 MB and seconds to build); patterns whose automata would be large
//! run here instead. Leftmost-first, as Go's search and the automata's; the deadline is looked
//! at as the search goes.

use std::collections::HashMap;
use std::sync::Arc;

use regex_syntax::hir::{Class, Hir, HirKind, Look};

use super::error::EvalError;
use super::meter::Ticker;

/// One instruction.
#[derive(Clone)]
enum Inst {
    /// One character within the sorted ranges.
    Class(Arc<[(char, char)]>),
    /// An assertion at the current position.
    Look(Look),
    /// Both ways, the first preferred.
    Split(u32, u32),
    Jmp(u32),
    Match,
}

/// A compiled program.
#[derive(Clone)]
pub struct Program {
    insts: Vec<Inst>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Program({} instructions)", self.insts.len())
    }
}

/// Why a tree does not compile here: an assertion Go does not have, or more instructions than
/// `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    Look,
    TooLarge,
}

/// The bytes one instruction of the program takes.
pub const PROGRAM_INST_BYTES: u64 = std::mem::size_of::<Inst>() as u64;

/// The bytes a search takes per instruction at most: two thread lists, each a sparse entry
/// and a dense one, and the stack `add` follows (each instruction pushes at most two).
pub const SEARCH_INST_BYTES: u64 = (2
    * (std::mem::size_of::<u32>() + std::mem::size_of::<(u32, usize)>())
    + 2 * std::mem::size_of::<usize>()) as u64;

/// The bytes one instruction takes: the program and a search over it.
pub const INST_BYTES: u64 = PROGRAM_INST_BYTES + SEARCH_INST_BYTES;

/// The largest program whose search lists a thread keeps for its next search (about 4 MiB
/// of lists): a constant pattern's program is at most this, so searches over constants do
/// not allocate and zero their lists each time; a larger run-time one's are freed.
const KEEP_LISTS_UP_TO: usize = 1 << 16;

thread_local! {
    /// The lists of this thread's last search, kept for the next (see [`KEEP_LISTS_UP_TO`]).
    static SPARE: std::cell::RefCell<Option<Searcher>> = const { std::cell::RefCell::new(None) };
}

impl Program {
    /// Compiles `hir` into at most `limit` instructions.
    pub fn new(hir: &Hir, limit: usize) -> Result<Program, Unsupported> {
        let mut c = Compiler {
            insts: Vec::new(),
            classes: HashMap::new(),
            limit,
        };
        c.compile(hir)?;
        c.push(Inst::Match)?;
        Ok(Program { insts: c.insts })
    }

    /// Whether the pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str, ticker: &mut Ticker) -> Result<bool, EvalError> {
        self.with_searcher(ticker, |s, ticker| {
            Ok(s.search(self, text, 0, true, ticker)?.is_some())
        })
    }

    /// The leftmost-first match.
    pub fn find(
        &self,
        text: &str,
        ticker: &mut Ticker,
    ) -> Result<Option<(usize, usize)>, EvalError> {
        self.with_searcher(ticker, |s, ticker| s.search(self, text, 0, false, ticker))
    }

    /// The successive matches, as Go's `FindAll` (and the automata's iterator) take them: an
    /// empty match right after the previous match is skipped. `f` returns whether to go on.
    pub fn for_each_match(
        &self,
        text: &str,
        ticker: &mut Ticker,
        mut f: impl FnMut(usize, usize) -> Result<bool, EvalError>,
    ) -> Result<(), EvalError> {
        self.with_searcher(ticker, |searcher, ticker| {
            self.each_match(searcher, text, ticker, &mut f)
        })
    }

    fn each_match(
        &self,
        searcher: &mut Searcher,
        text: &str,
        ticker: &mut Ticker,
        f: &mut impl FnMut(usize, usize) -> Result<bool, EvalError>,
    ) -> Result<(), EvalError> {
        let mut at = 0;
        let mut last_end = None;
        while at <= text.len() {
            let Some((start, end)) = searcher.search(self, text, at, false, ticker)? else {
                break;
            };
            if start == end && last_end == Some(end) {
                at = next_char(text, at);
                continue;
            }
            if !f(start, end)? {
                break;
            }
            last_end = Some(end);
            at = if start == end {
                next_char(text, end)
            } else {
                end
            };
        }
        Ok(())
    }

    /// Runs `f` with lists for a search over this program: their size checked against the
    /// room under the memory ceiling before they are allocated (or grown from this thread's
    /// spare ones), then kept for the thread's next search if small.
    fn with_searcher<R>(
        &self,
        ticker: &mut Ticker,
        f: impl FnOnce(&mut Searcher, &mut Ticker) -> Result<R, EvalError>,
    ) -> Result<R, EvalError> {
        let n = self.insts.len();
        ticker.room_for((n as u64).saturating_mul(SEARCH_INST_BYTES))?;
        let mut searcher = SPARE
            .with(|spare| spare.borrow_mut().take())
            .unwrap_or_default();
        searcher.fit(n);
        let result = f(&mut searcher, ticker);
        if n <= KEEP_LISTS_UP_TO {
            SPARE.with(|spare| *spare.borrow_mut() = Some(searcher));
        }
        result
    }
}

/// The byte after the character at `at` (past the end when there is none).
fn next_char(text: &str, at: usize) -> usize {
    at + text
        .get(at..)
        .and_then(|t| t.chars().next())
        .map_or(1, char::len_utf8)
}

/// The thread lists of a search, kept from one match to the next, and `add`'s stack.
#[derive(Default)]
struct Searcher {
    now: Threads,
    next: Threads,
    stack: Vec<usize>,
}

impl Searcher {
    /// Lists for a program of `n` instructions. The sparse entries are not cleared: a stale
    /// one is told apart by the dense list (see [`Threads::insert`]).
    fn fit(&mut self, n: usize) {
        for t in [&mut self.now, &mut self.next] {
            t.sparse.resize(n, 0);
            t.dense.clear();
        }
    }

    fn search(
        &mut self,
        prog: &Program,
        text: &str,
        from: usize,
        any: bool,
        ticker: &mut Ticker,
    ) -> Result<Option<(usize, usize)>, EvalError> {
        let (now, next, stack) = (&mut self.now, &mut self.next, &mut self.stack);
        now.clear();
        next.clear();
        let mut found = None;
        let mut pos = from;
        loop {
            // A thread starting here, after (below) the ones already running.
            if found.is_none() {
                prog.add(now, stack, 0, pos, pos, text);
            }
            if now.is_empty() {
                break;
            }
            let c = text.get(pos..).and_then(|t| t.chars().next());
            ticker.steps(u32::try_from(now.len()).unwrap_or(u32::MAX))?;
            for i in 0..now.len() {
                let (pc, start) = now.get(i);
                match &prog.insts[pc] {
                    Inst::Class(ranges) => {
                        if let Some(c) = c.filter(|c| in_ranges(ranges, *c)) {
                            prog.add(next, stack, pc + 1, start, pos + c.len_utf8(), text);
                        }
                    }
                    Inst::Match => {
                        found = Some((start, pos));
                        if any {
                            return Ok(found);
                        }
                        // Threads below this one are less preferred: dropped.
                        break;
                    }
                    Inst::Look(_) | Inst::Split(..) | Inst::Jmp(_) => {}
                }
            }
            std::mem::swap(now, next);
            next.clear();
            match c {
                Some(c) => pos += c.len_utf8(),
                None => break,
            }
        }
        Ok(found)
    }
}

impl Program {
    /// Adds the thread at `pc` and every instruction it reaches without reading, in order of
    /// preference (an explicit stack: a chain of splits can be as long as the program).
    fn add(
        &self,
        list: &mut Threads,
        stack: &mut Vec<usize>,
        pc: usize,
        start: usize,
        pos: usize,
        text: &str,
    ) {
        stack.clear();
        stack.push(pc);
        while let Some(pc) = stack.pop() {
            if !list.insert(pc, start) {
                continue;
            }
            match &self.insts[pc] {
                Inst::Jmp(to) => stack.push(*to as usize),
                Inst::Split(a, b) => {
                    stack.push(*b as usize);
                    stack.push(*a as usize);
                }
                Inst::Look(look) => {
                    if holds(*look, text, pos) {
                        stack.push(pc + 1);
                    }
                }
                Inst::Class(_) | Inst::Match => {}
            }
        }
    }
}

/// The threads of one step: a sparse set of instructions in order, each with its match's
/// start.
#[derive(Default)]
struct Threads {
    dense: Vec<(u32, usize)>,
    sparse: Vec<u32>,
}

impl Threads {
    /// Adds `pc` unless present. A sparse entry may be stale (left by an earlier search): it
    /// counts only when it points into the dense list at `pc` itself.
    fn insert(&mut self, pc: usize, start: usize) -> bool {
        let at = self.sparse[pc] as usize;
        if at < self.dense.len() && self.dense[at].0 as usize == pc {
            return false;
        }
        // Program sizes are bounded far below u32::MAX (Go's 3.3 million instructions).
        self.sparse[pc] = self.dense.len() as u32;
        self.dense.push((pc as u32, start));
        true
    }

    fn get(&self, i: usize) -> (usize, usize) {
        let (pc, start) = self.dense[i];
        (pc as usize, start)
    }

    fn len(&self) -> usize {
        self.dense.len()
    }

    fn is_empty(&self) -> bool {
        self.dense.is_empty()
    }

    fn clear(&mut self) {
        self.dense.clear();
    }
}

fn in_ranges(ranges: &[(char, char)], c: char) -> bool {
    let i = ranges.partition_point(|(_, end)| *end < c);
    ranges.get(i).is_some_and(|(start, _)| *start <= c)
}

/// Whether the assertion holds at byte `pos` of `text`.
fn holds(look: Look, text: &str, pos: usize) -> bool {
    let before = text.get(..pos).and_then(|t| t.chars().next_back());
    let after = text.get(pos..).and_then(|t| t.chars().next());
    let ascii_word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let word = |c: Option<char>| {
        c.is_some_and(|c| regex_syntax::try_is_word_character(c).unwrap_or(false))
    };
    match look {
        Look::Start => pos == 0,
        Look::End => pos == text.len(),
        Look::StartLF => before.is_none_or(|c| c == '\n'),
        Look::EndLF => after.is_none_or(|c| c == '\n'),
        Look::WordAscii => ascii_word(before) != ascii_word(after),
        Look::WordAsciiNegate => ascii_word(before) == ascii_word(after),
        Look::WordUnicode => word(before) != word(after),
        Look::WordUnicodeNegate => word(before) == word(after),
        // Not reached: `compile` refuses the assertions Go does not have.
        _ => false,
    }
}

struct Compiler {
    insts: Vec<Inst>,
    /// Each class's ranges, once for all its copies (keyed by the tree node's address).
    classes: HashMap<*const Class, Arc<[(char, char)]>>,
    limit: usize,
}

impl Compiler {
    fn push(&mut self, inst: Inst) -> Result<usize, Unsupported> {
        if self.insts.len() >= self.limit {
            return Err(Unsupported::TooLarge);
        }
        self.insts.push(inst);
        Ok(self.insts.len() - 1)
    }

    fn pc(&self) -> u32 {
        // Bounded by `limit`, itself far below u32::MAX.
        self.insts.len() as u32
    }

    fn patch(&mut self, at: usize, inst: Inst) {
        self.insts[at] = inst;
    }

    fn compile(&mut self, hir: &Hir) -> Result<(), Unsupported> {
        match hir.kind() {
            HirKind::Empty => Ok(()),
            HirKind::Literal(l) => {
                for c in String::from_utf8_lossy(&l.0).chars() {
                    self.push(Inst::Class(Arc::from([(c, c)])))?;
                }
                Ok(())
            }
            HirKind::Class(class) => {
                let key = class as *const Class;
                let ranges = match self.classes.get(&key) {
                    Some(r) => r.clone(),
                    None => {
                        let r: Arc<[(char, char)]> = match class {
                            Class::Unicode(u) => {
                                u.ranges().iter().map(|r| (r.start(), r.end())).collect()
                            }
                            Class::Bytes(b) => b
                                .ranges()
                                .iter()
                                .map(|r| (char::from(r.start()), char::from(r.end())))
                                .collect(),
                        };
                        self.classes.insert(key, r.clone());
                        r
                    }
                };
                self.push(Inst::Class(ranges)).map(drop)
            }
            HirKind::Look(look) => match look {
                Look::Start
                | Look::End
                | Look::StartLF
                | Look::EndLF
                | Look::WordAscii
                | Look::WordAsciiNegate
                | Look::WordUnicode
                | Look::WordUnicodeNegate => self.push(Inst::Look(*look)).map(drop),
                _ => Err(Unsupported::Look),
            },
            HirKind::Capture(c) => self.compile(&c.sub),
            HirKind::Concat(v) => v.iter().try_for_each(|h| self.compile(h)),
            HirKind::Alternation(v) => {
                let mut jumps = Vec::new();
                for (i, h) in v.iter().enumerate() {
                    if i + 1 == v.len() {
                        self.compile(h)?;
                        break;
                    }
                    let split = self.push(Inst::Jmp(0))?;
                    self.compile(h)?;
                    jumps.push(self.push(Inst::Jmp(0))?);
                    let next = self.pc();
                    self.patch(split, Inst::Split(split as u32 + 1, next));
                }
                let end = self.pc();
                for j in jumps {
                    self.patch(j, Inst::Jmp(end));
                }
                Ok(())
            }
            HirKind::Repetition(r) => {
                for _ in 0..r.min {
                    self.compile(&r.sub)?;
                }
                let split = |body: u32, out: u32| {
                    if r.greedy {
                        Inst::Split(body, out)
                    } else {
                        Inst::Split(out, body)
                    }
                };
                match r.max {
                    // x*: a loop.
                    None => {
                        let at = self.push(Inst::Jmp(0))?;
                        self.compile(&r.sub)?;
                        self.push(Inst::Jmp(at as u32))?;
                        let out = self.pc();
                        self.patch(at, split(at as u32 + 1, out));
                    }
                    // x{n,m}: m-n nested optional copies, as Go's simplify writes them
                    // (`(x(x)?)?`): each skip leaves the whole rest.
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in r.min..max {
                            splits.push(self.push(Inst::Jmp(0))?);
                            self.compile(&r.sub)?;
                        }
                        let out = self.pc();
                        for s in splits {
                            self.patch(s, split(s as u32 + 1, out));
                        }
                    }
                }
                Ok(())
            }
        }
    }
}
