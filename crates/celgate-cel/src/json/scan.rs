//! The byte-level parser behind [`Doc::parse`](super::Doc::parse) and
//! [`Doc::parse_projected`](super::Doc::parse_projected).
//!
//! It builds exactly the document the serde_json-driven builder of `json.rs` builds (the same
//! nodes, entries, element tables, key indexes and unescaped text) in one pass over the bytes,
//! without serde's per-value visitor calls; a string's plain run is found eight bytes at a
//! time. It only answers "this is the document" or "no":
//! on any refusal the caller runs the serde_json parse again for its error, so every message
//! stays serde_json's (or the duplicate-key and depth messages of `json.rs`), byte for byte.
//! What it accepts is RFC 8259 JSON as serde_json reads it: the same whitespace, no leading
//! zeros, `\u` escapes with surrogate pairs only in pairs, no control character in a string.
//! Numbers that are not plain integers (a fraction, an exponent, more digits than `u64`
//! holds) are rare in Kubernetes objects and are handed to serde_json's own number parser, so
//! their value (and their "out of range" refusals) cannot differ from the full parse.
//!
//! Under a projection, a container nobody reads is scanned instead of built: the same checks
//! (grammar, strings, numbers, depth, repeated keys) run, and one [`Node::Skipped`] records
//! its kind and byte span.

use super::{
    char_count, index, mask_bit, repeated_key, same_key, span, with_stack, Build, Entry, KeyIndex,
    Node, Span, GROW_FROM, MASK_MAX, MAX_DEPTH, NONE,
};
use crate::projection::{Projection, Projections};

/// The input is not a document this parser builds (the serde_json parse says why).
#[derive(Debug)]
pub(super) struct Fail;

type Scanned<T> = Result<T, Fail>;

/// How much of a value to build.
#[derive(Clone, Copy)]
pub(super) enum Mode<'p> {
    /// All of it.
    Full,
    /// What the projection covers.
    Project(&'p Projection),
    /// Nothing below it: a container is skipped.
    Skip,
    /// A value on the way to projected ones: its members on a route are followed, the others
    /// are built in full.
    Route(&'p Projections),
}

impl<'p> Mode<'p> {
    fn of(p: Option<&'p Projection>) -> Mode<'p> {
        match p {
            None => Mode::Skip,
            Some(p) if p.is_none() => Mode::Skip,
            Some(p) if p.is_whole() => Mode::Full,
            Some(p) => Mode::Project(p),
        }
    }

    /// The mode of an object member (`prefix`: the key's [`super::prefix`]).
    fn member(self, prefix: u64, key: &str) -> Mode<'p> {
        match self {
            Mode::Full => Mode::Full,
            Mode::Skip => Mode::Skip,
            Mode::Project(p) => Mode::of(p.field_prefixed(prefix, key)),
            Mode::Route(r) => r
                .below_prefixed(prefix, key)
                .map_or(Mode::Full, Mode::route),
        }
    }

    /// The mode of an array element.
    fn element(self) -> Mode<'p> {
        match self {
            Mode::Full | Mode::Route(_) => Mode::Full,
            Mode::Skip => Mode::Skip,
            Mode::Project(p) => Mode::of(p.element()),
        }
    }

    /// The mode of the value at a route's end, or on the way to one.
    pub(super) fn route(r: &'p Projections) -> Mode<'p> {
        match r.here() {
            Some(p) => Mode::of(Some(p)),
            None => Mode::Route(r),
        }
    }
}

/// The position of the first byte from `i` that ends a string's plain run: a quote, a
/// backslash or a control character (refused in a string), else the length; and whether a
/// byte before it is not ASCII (so that an all-ASCII string's code points are its bytes,
/// counted for free).
#[cfg(test)]
pub(super) fn special(bytes: &[u8], i: usize) -> (usize, bool) {
    special_run::<true>(bytes, i)
}

/// [`special`]'s position alone, for text nobody reads (its code points are not needed).
#[inline(always)]
pub(super) fn special_end(bytes: &[u8], i: usize) -> usize {
    special_run::<false>(bytes, i).0
}

/// [`special`], the non-ASCII test made only when `WIDE`.
#[inline(always)]
fn special_run<const WIDE: bool>(bytes: &[u8], i: usize) -> (usize, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        special_sse2::<WIDE>(bytes, i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        special_swar::<WIDE>(bytes, i)
    }
}

/// [`special`] sixteen bytes at a time with SSE2 (part of every x86-64 CPU, and its
/// intrinsics are safe to call there): the three tests compare all sixteen bytes at once,
/// and the mask of their high bits is the non-ASCII test for free.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn special_sse2<const WIDE: bool>(bytes: &[u8], mut i: usize) -> (usize, bool) {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
        _mm_set_epi64x,
    };
    let half = |c: &[u8]| {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        i64::from_le_bytes(word)
    };
    let mut wide = 0u32;
    while let Some(chunk) = bytes.get(i..i + 16) {
        let (lo, hi) = chunk.split_at(8);
        // SAFETY: these intrinsics only require the CPU to have SSE2, which is part of the
        // x86-64 baseline (every x86_64 target enables it; this is compiled for x86_64
        // only). They read no memory: the bytes come in as two integers.
        let (found, high) = unsafe {
            let v = _mm_set_epi64x(half(hi), half(lo));
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            // A byte is below 0x20 when the unsigned maximum with 0x1f leaves 0x1f.
            let low = _mm_set1_epi8(0x1f);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
            let any = _mm_or_si128(_mm_or_si128(quote, backslash), control);
            let high = if WIDE { _mm_movemask_epi8(v) as u32 } else { 0 };
            (_mm_movemask_epi8(any) as u32, high)
        };
        if found != 0 {
            if WIDE {
                // The high bits of the bytes before the match.
                wide |= high & ((found & found.wrapping_neg()) - 1);
            }
            return (i + found.trailing_zeros() as usize, wide != 0);
        }
        wide |= high;
        i += 16;
    }
    let (end, tail) = special_swar::<WIDE>(bytes, i);
    (end, tail || wide != 0)
}

/// [`special`] eight bytes at a time in a `u64`: in each word, a byte is flagged when it is
/// below 0x20 or equal to one of the two after an XOR; the borrows of the subtractions only
/// ever flag bytes above a true match, so the lowest flag is the first match, and the high
/// bits below it are the run's own.
#[inline(always)]
fn special_swar<const WIDE: bool>(bytes: &[u8], mut i: usize) -> (usize, bool) {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let mut wide = 0u64;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let flags = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | w.wrapping_sub(ONES * 0x20) & !w)
            & HIGH;
        if flags != 0 {
            if WIDE {
                // The bits below the first flag: the bytes before the match.
                let before = (flags & flags.wrapping_neg()) - 1;
                wide |= w & HIGH & before;
            }
            return (i + (flags.trailing_zeros() / 8) as usize, wide != 0);
        }
        if WIDE {
            wide |= w & HIGH;
        }
        i += 8;
    }
    let mut wide = wide != 0;
    while let Some(&c) = bytes.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        wide |= WIDE && c >= 0x80;
        i += 1;
    }
    (i, wide)
}

/// The code points of valid UTF-8: the bytes that do not continue a character.
fn code_points(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

/// The first eight bytes of the key `len` bytes long at `at` of `bytes`, as
/// [`prefix`](super::prefix) makes them (zero-padded).
#[inline(always)]
fn prefix_at(bytes: &[u8], at: usize, len: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(chunk) => {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let w = u64::from_le_bytes(word);
            if len >= 8 {
                w
            } else {
                w & ((1u64 << (8 * len)) - 1)
            }
        }
        None => {
            let mut word = [0u8; 8];
            let n = len.min(8);
            if let Some(key) = bytes.get(at..at + n) {
                word[..n].copy_from_slice(key);
            }
            u64::from_le_bytes(word)
        }
    }
}

/// One escape after its backslash (at `i` of `bytes`): its character, and where the text
/// goes on.
#[inline]
fn escape(bytes: &[u8], i: usize) -> Scanned<(char, usize)> {
    let c = match *bytes.get(i).ok_or(Fail)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex4(bytes, i + 1)?;
            return match hi {
                0xDC00..=0xDFFF => Err(Fail),
                0xD800..=0xDBFF => {
                    if bytes.get(i + 5..i + 7) != Some(b"\\u") {
                        return Err(Fail);
                    }
                    let lo = hex4(bytes, i + 7)?;
                    if !(0xDC00..=0xDFFF).contains(&lo) {
                        return Err(Fail);
                    }
                    let n = 0x1_0000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    Ok((char::from_u32(n).ok_or(Fail)?, i + 11))
                }
                n => Ok((char::from_u32(n).ok_or(Fail)?, i + 5)),
            };
        }
        _ => return Err(Fail),
    };
    Ok((c, i + 1))
}

/// Four hex digits at `i` of `bytes`.
fn hex4(bytes: &[u8], i: usize) -> Scanned<u32> {
    let digits = bytes.get(i..i + 4).ok_or(Fail)?;
    digits.iter().try_fold(0u32, |n, &d| {
        let v = (d as char).to_digit(16).ok_or(Fail)?;
        Ok(n * 16 + v)
    })
}

/// The position after the whitespace at `i` of `bytes`.
#[inline(always)]
fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = bytes.get(i) {
        i += 1;
    }
    i
}

/// The next byte after whitespace from `i` of `bytes`, and its position.
#[inline(always)]
fn token_at(bytes: &[u8], i: usize) -> Scanned<(u8, usize)> {
    let i = skip_ws(bytes, i);
    match bytes.get(i) {
        Some(&c) => Ok((c, i)),
        None => Err(Fail),
    }
}

/// The position after the string whose opening quote is at `i` of `bytes`, its escapes
/// checked, not unescaped.
#[inline(always)]
fn skip_string(bytes: &[u8], i: usize) -> Scanned<usize> {
    let mut i = special_end(bytes, i + 1);
    loop {
        match bytes.get(i) {
            Some(b'"') => return Ok(i + 1),
            Some(b'\\') => i = special_end(bytes, escape(bytes, i + 1)?.1),
            _ => return Err(Fail),
        }
    }
}

/// The position after one or more digits at `i` of `bytes`.
#[inline(always)]
fn skip_digits(bytes: &[u8], mut i: usize) -> Scanned<usize> {
    let from = i;
    while let Some(b'0'..=b'9') = bytes.get(i) {
        i += 1;
    }
    if i == from {
        Err(Fail)
    } else {
        Ok(i)
    }
}

/// The position after the literal or number at `i` of `text`, nobody reading it.
#[inline(always)]
fn skip_scalar(text: &str, i: usize) -> Scanned<usize> {
    let bytes = text.as_bytes();
    let word = |w: &[u8]| {
        if bytes.get(i..i + w.len()) == Some(w) {
            Ok(i + w.len())
        } else {
            Err(Fail)
        }
    };
    match bytes.get(i) {
        Some(b'n') => word(b"null"),
        Some(b't') => word(b"true"),
        Some(b'f') => word(b"false"),
        Some(b'-' | b'0'..=b'9') => skip_number(text, i),
        _ => Err(Fail),
    }
}

/// The position after the number at `i` of `text`, its grammar checked as [`Scan::number`]
/// checks it. An integer of up to 19 digits always fits `u64` and is accepted as it is; any
/// other number (where [`Scan::number`] asks serde_json, whose "out of range" is a refusal)
/// is given to serde_json's parser alike.
fn skip_number(text: &str, start: usize) -> Scanned<usize> {
    let bytes = text.as_bytes();
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    let mut plain = match bytes.get(i) {
        Some(b'0') => {
            i += 1;
            if let Some(b'0'..=b'9') = bytes.get(i) {
                return Err(Fail);
            }
            true
        }
        Some(b'1'..=b'9') => {
            let from = i;
            i = skip_digits(bytes, i)?;
            i - from <= 19
        }
        _ => return Err(Fail),
    };
    if bytes.get(i) == Some(&b'.') {
        i = skip_digits(bytes, i + 1)?;
        plain = false;
    }
    if let Some(b'e' | b'E') = bytes.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = bytes.get(i) {
            i += 1;
        }
        i = skip_digits(bytes, i)?;
        plain = false;
    }
    if plain {
        return Ok(i);
    }
    let number = text.get(start..i).ok_or(Fail)?;
    serde_json::from_str::<f64>(number)
        .map(|_| i)
        .map_err(|_| Fail)
}

pub(super) struct Scan<'s, 'b> {
    text: &'s str,
    bytes: &'s [u8],
    pos: usize,
    b: &'b mut Build<'s>,
}

/// A container being skipped. An object's keys are checked for a repeat as they come
/// (a key whose bit is already in the mask is compared with the keys before it) and, past
/// [`MASK_MAX`] keys, through `repeated_key`'s table when it closes.
struct Open {
    /// The keys' mask (see `repeated_key`).
    seen: u64,
    /// Where its keys start in `Build::pending`.
    mark: u32,
    object: bool,
}

impl Open {
    fn close(&self) -> u8 {
        if self.object {
            b'}'
        } else {
            b']'
        }
    }
}

/// Parses all of `b.text` into `b` (one value, whitespace around it).
pub(super) fn parse(b: &mut Build<'_>, mode: Mode<'_>) -> Scanned<()> {
    let text = b.text;
    // Every span of the input, and of the unescaped text (never longer), then fits `u32`.
    if u32::try_from(text.len()).is_err() {
        return Err(Fail);
    }
    let mut s = Scan {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        b,
    };
    s.value(mode)?;
    s.ws();
    if s.pos == s.bytes.len() {
        Ok(())
    } else {
        Err(Fail)
    }
}

impl<'s> Scan<'s, '_> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace.
    #[inline(always)]
    fn token(&mut self) -> Scanned<u8> {
        self.ws();
        self.peek().ok_or(Fail)
    }

    /// One value. Strings and scalars, most values, are read in line; a container in a call.
    #[inline(always)]
    fn value(&mut self, mode: Mode<'_>) -> Scanned<()> {
        match self.token()? {
            b'{' | b'[' => self.container(mode),
            b'"' => {
                let (span, escaped, chars) = self.string()?;
                self.b.nodes.push(if escaped {
                    Node::Escaped(span, chars)
                } else {
                    Node::Str(span, chars)
                });
                Ok(())
            }
            _ => {
                let node = self.scalar()?;
                self.b.nodes.push(node);
                Ok(())
            }
        }
    }

    /// A container at its opening bracket.
    fn container(&mut self, mode: Mode<'_>) -> Scanned<()> {
        let object = self.peek() == Some(b'{');
        match mode {
            Mode::Skip => self.skipped(object),
            _ if object => self.nested(|s| s.object(mode)),
            _ => self.nested(|s| s.array(mode)),
        }
    }

    /// A literal or a number.
    #[inline]
    fn scalar(&mut self) -> Scanned<Node> {
        let word = |s: &mut Self, w: &[u8], node: Node| {
            if s.bytes[s.pos..].starts_with(w) {
                s.pos += w.len();
                Ok(node)
            } else {
                Err(Fail)
            }
        };
        match self.peek().ok_or(Fail)? {
            b'n' => word(self, b"null", Node::Null),
            b't' => word(self, b"true", Node::Bool(true)),
            b'f' => word(self, b"false", Node::Bool(false)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Fail),
        }
    }

    /// One container level deeper: refused past [`MAX_DEPTH`], and past [`GROW_FROM`] on a
    /// new stack segment when the stack runs low (as `json::nested`).
    #[inline]
    fn nested(&mut self, body: impl FnOnce(&mut Self) -> Scanned<()>) -> Scanned<()> {
        if self.b.depth >= MAX_DEPTH {
            return Err(Fail);
        }
        self.b.depth += 1;
        let result = if self.b.depth <= GROW_FROM {
            body(self)
        } else {
            with_stack(|| body(self))
        };
        self.b.depth -= 1;
        result
    }

    fn array(&mut self, mode: Mode<'_>) -> Scanned<()> {
        self.pos += 1;
        let at = self.b.nodes.len();
        self.b.nodes.push(Node::Array {
            len: 0,
            end: 0,
            table: NONE,
        });
        let mark = self.b.pending_elements.len();
        let mut len = 0usize;
        if self.token()? == b']' {
            self.pos += 1;
        } else {
            let each = mode.element();
            loop {
                let start = index(self.b.nodes.len());
                self.value(each)?;
                self.b.pending_elements.push(start);
                len += 1;
                match self.token()? {
                    b',' => self.pos += 1,
                    b']' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Fail),
                }
            }
        }
        self.b.close_array(at, mark, len);
        Ok(())
    }

    /// One `"key":` of an object (the key's entry, its value still to come).
    #[inline(always)]
    fn key<'p>(&mut self, mode: Mode<'p>) -> Scanned<(Entry, Mode<'p>)> {
        if self.token()? != b'"' {
            return Err(Fail);
        }
        let (key, escaped, _) = self.raw_string::<false>()?;
        let (at, len) = (key.at as usize, key.len as usize);
        fn text<'a>(s: &'a Scan<'_, '_>, escaped: bool, at: usize, len: usize) -> Scanned<&'a str> {
            let source = if escaped { &s.b.unescaped } else { s.text };
            source.get(at..at + len).ok_or(Fail)
        }
        let prefix = if escaped {
            super::prefix(text(self, escaped, at, len)?)
        } else {
            prefix_at(self.bytes, at, len)
        };
        let entry = Entry {
            prefix,
            key,
            value: index(self.b.nodes.len()),
            escaped,
        };
        // Only a projection reads the key's text.
        let mode = match mode {
            Mode::Full | Mode::Skip => mode,
            Mode::Project(_) | Mode::Route(_) => mode.member(prefix, text(self, escaped, at, len)?),
        };
        if self.token()? != b':' {
            return Err(Fail);
        }
        self.pos += 1;
        Ok((entry, mode))
    }

    fn object(&mut self, mode: Mode<'_>) -> Scanned<()> {
        self.pos += 1;
        let at = self.b.nodes.len();
        self.b.nodes.push(Node::Object {
            first: 0,
            len: 0,
            end: 0,
        });
        let mark = self.b.pending.len();
        // The keys' mask (see `repeated_key`), made as they come: only a collision in it, or
        // a large object, needs the check of `repeated_key`.
        let mut seen = 0u64;
        let mut collided = false;
        if self.token()? == b'}' {
            self.pos += 1;
        } else {
            loop {
                let (entry, member) = self.key(mode)?;
                let bit = mask_bit(&entry);
                collided |= seen & bit != 0;
                seen |= bit;
                self.b.pending.push(entry);
                self.value(member)?;
                match self.token()? {
                    b',' => self.pos += 1,
                    b'}' => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Fail),
                }
            }
        }
        let b = &mut *self.b;
        let keys = &b.pending[mark..];
        if (collided || keys.len() > MASK_MAX)
            && repeated_key(b.text, &b.unescaped, keys, &mut b.table, &mut b.hasher).is_some()
        {
            return Err(Fail);
        }
        let first = index(b.entries.len());
        let len = index(b.pending.len() - mark);
        // As `json::object`: the duplicate check of a large object has just filled `table`
        // with its keys, kept as the object's lookup index.
        if len as usize > MASK_MAX {
            b.key_indexes.push(KeyIndex {
                first,
                at: index(b.key_slots.len()),
                slots: index(b.table.len()),
            });
            b.key_slots.extend_from_slice(&b.table);
        }
        b.entries.extend_from_slice(&b.pending[mark..]);
        b.pending.truncate(mark);
        b.nodes[at] = Node::Object {
            first,
            len,
            end: index(b.nodes.len()),
        };
        Ok(())
    }

    /// A string at the opening quote: its span, whether it was unescaped into
    /// `Build::unescaped` (else it is a span of the input), and its number of code points.
    #[inline(always)]
    fn string(&mut self) -> Scanned<(Span, bool, u32)> {
        let start = self.pos + 1;
        let (span, escaped, wide) = self.raw_string::<true>()?;
        let chars = if escaped {
            let at = span.at as usize;
            char_count(self.b.unescaped.get(at..).ok_or(Fail)?)
        } else if wide {
            // The run is valid UTF-8 (the whole text is, and both ends are next to an ASCII
            // quote).
            code_points(&self.bytes[start..start + span.len as usize])
        } else {
            // All ASCII: its code points are its bytes.
            span.len as usize
        };
        // Fits: no longer than the input (see `parse`).
        Ok((span, escaped, chars as u32))
    }

    /// A string at the opening quote: its span, whether it was unescaped into
    /// `Build::unescaped` (else it is a span of the input), and, if `WIDE` and it was not,
    /// whether it has a byte that is not ASCII.
    #[inline(always)]
    fn raw_string<const WIDE: bool>(&mut self) -> Scanned<(Span, bool, bool)> {
        let start = self.pos + 1;
        let (end, wide) = special_run::<WIDE>(self.bytes, start);
        if self.bytes.get(end) == Some(&b'"') {
            self.pos = end + 1;
            // Fits: the input is shorter than `u32::MAX` bytes (see `parse`).
            let span = Span {
                at: start as u32,
                len: (end - start) as u32,
            };
            return Ok((span, false, wide));
        }
        let span = self.escaped_string(start, end - start)?;
        Ok((span, true, false))
    }

    /// The rest of a string from its first special byte (at `start + plain`), unescaped into
    /// `Build::unescaped`: its span there.
    #[cold]
    fn escaped_string(&mut self, start: usize, plain: usize) -> Scanned<Span> {
        let at = self.b.unescaped.len();
        let mut from = start;
        let mut i = start + plain;
        loop {
            // `from..i` is escape-free text between ASCII bytes.
            let part = self.text.get(from..i).ok_or(Fail)?;
            self.b.unescaped.push_str(part);
            match self.bytes.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    break;
                }
                Some(b'\\') => {
                    let (c, next) = escape(self.bytes, i + 1)?;
                    self.b.unescaped.push(c);
                    i = next;
                }
                _ => return Err(Fail),
            }
            from = i;
            i = special_end(self.bytes, i);
        }
        let len = self.b.unescaped.len() - at;
        span::<serde_json::Error>(at, len).map_err(|_| Fail)
    }

    /// A number (its grammar checked here). An integer that fits `u64` is read here, as
    /// serde_json reads it: `int` when it fits `i64`, else `double` (and `-0` is a double);
    /// any other number is read by serde_json's own parser.
    fn number(&mut self) -> Scanned<Node> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let mut value = 0u64;
        let mut overflow = false;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(Fail);
                }
            }
            Some(b'1'..=b'9') => {
                while let Some(d @ b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                    match value
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(u64::from(d - b'0')))
                    {
                        Some(v) => value = v,
                        None => overflow = true,
                    }
                }
            }
            _ => return Err(Fail),
        }
        let mut plain = !overflow;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
            plain = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.digits()?;
            plain = false;
        }
        if !plain {
            let text = self.text.get(start..self.pos).ok_or(Fail)?;
            return serde_json::from_str::<f64>(text)
                .map(Node::Double)
                .map_err(|_| Fail);
        }
        Ok(if !negative {
            i64::try_from(value).map_or(Node::Double(value as f64), Node::Int)
        } else {
            // `-0` and magnitudes past `i64::MIN` are doubles.
            match 0i64.checked_sub_unsigned(value) {
                Some(0) | None => Node::Double(-(value as f64)),
                Some(v) => Node::Int(v),
            }
        })
    }

    /// One or more digits.
    fn digits(&mut self) -> Scanned<()> {
        let from = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        if self.pos == from {
            Err(Fail)
        } else {
            Ok(())
        }
    }

    /// A container nobody reads, at its opening bracket: checked as a full parse checks it,
    /// recorded as one node.
    fn skipped(&mut self, object: bool) -> Scanned<()> {
        let start = self.pos;
        let unescaped = self.b.unescaped.len();
        self.pos = self.skip(start, self.b.depth, object)?;
        // Keys unescaped for the repeated-key check are not part of the document.
        self.b.unescaped.truncate(unescaped);
        // Fits: the input is shorter than `u32::MAX` bytes (see `parse`).
        let (at, len) = (start as u32, (self.pos - start) as u32);
        self.b.nodes.push(Node::Skipped { object, at, len });
        Ok(())
    }

    /// Scans the container at its opening bracket (at `i`) to its end, checking its
    /// grammar, depth, strings, numbers and keys as [`Scan::object`] and [`Scan::array`] do
    /// but keeping nothing: no nodes, no code points, no number values; a key is unescaped
    /// only when it has an escape (for the repeated-key check). The position is passed
    /// along in registers; returns the position after the container.
    fn skip(&mut self, i: usize, depth: usize, object: bool) -> Scanned<usize> {
        if depth >= MAX_DEPTH {
            return Err(Fail);
        }
        let depth = depth + 1;
        if depth <= GROW_FROM {
            self.skip_in(i, depth, object)
        } else {
            with_stack(|| self.skip_in(i, depth, object))
        }
    }

    fn skip_in(&mut self, i: usize, depth: usize, object: bool) -> Scanned<usize> {
        let (text, bytes) = (self.text, self.bytes);
        let mut cur = Open {
            seen: 0,
            mark: index(self.b.pending.len()),
            object,
        };
        let close = cur.close();
        let (mut t, mut at) = token_at(bytes, i + 1)?;
        if t == close {
            return Ok(at + 1);
        }
        loop {
            if object {
                if t != b'"' {
                    return Err(Fail);
                }
                (t, at) = token_at(bytes, self.skip_key(&mut cur, at)?)?;
            }
            let i = match t {
                b'{' => self.skip(at, depth, true)?,
                b'[' => self.skip(at, depth, false)?,
                b'"' => skip_string(bytes, at)?,
                _ => skip_scalar(text, at)?,
            };
            (t, at) = token_at(bytes, i)?;
            if t == b',' {
                (t, at) = token_at(bytes, at + 1)?;
            } else if t == close {
                self.leave(&cur)?;
                return Ok(at + 1);
            } else {
                return Err(Fail);
            }
        }
    }

    /// Closes a skipped container: an object of more than [`MASK_MAX`] keys is checked for
    /// a repeated key (a smaller one was as its keys came).
    #[inline(always)]
    fn leave(&mut self, cur: &Open) -> Scanned<()> {
        if !cur.object {
            return Ok(());
        }
        let b = &mut *self.b;
        let mark = cur.mark as usize;
        let keys = b.pending.get(mark..).unwrap_or_default();
        let repeated = keys.len() > MASK_MAX
            && repeated_key(b.text, &b.unescaped, keys, &mut b.table, &mut b.hasher).is_some();
        b.pending.truncate(mark);
        if repeated {
            Err(Fail)
        } else {
            Ok(())
        }
    }

    /// One `"key":` of a skipped object, its opening quote at `at`: kept in
    /// `Build::pending` (a key without escapes as a span of the input), and refused if an
    /// earlier key of the object is the same. Returns the position after the colon.
    #[inline(always)]
    fn skip_key(&mut self, cur: &mut Open, at: usize) -> Scanned<usize> {
        let bytes = self.bytes;
        let start = at + 1;
        let end = special_end(bytes, start);
        let (entry, after) = if bytes.get(end) == Some(&b'"') {
            let len = end - start;
            // Fits: the input is shorter than `u32::MAX` bytes (see `parse`).
            let key = Span {
                at: start as u32,
                len: len as u32,
            };
            let entry = Entry {
                prefix: prefix_at(bytes, start, len),
                key,
                value: 0,
                escaped: false,
            };
            (entry, end + 1)
        } else {
            self.escaped_key(start, end - start)?
        };
        let bit = mask_bit(&entry);
        let b = &mut *self.b;
        if cur.seen & bit != 0 {
            // Another key with this bit (rare below a dozen keys): compared with them all;
            // past `MASK_MAX` keys `leave` checks through its table instead.
            let keys = b.pending.get(cur.mark as usize..).unwrap_or_default();
            if keys.len() <= MASK_MAX
                && keys
                    .iter()
                    .any(|k| same_key(b.text, &b.unescaped, k, &entry))
            {
                return Err(Fail);
            }
        }
        cur.seen |= bit;
        b.pending.push(entry);
        match token_at(bytes, after)? {
            (b':', colon) => Ok(colon + 1),
            _ => Err(Fail),
        }
    }

    /// A key with an escape from `start + plain`, unescaped into `Build::unescaped`: its
    /// entry and the position after it.
    #[cold]
    fn escaped_key(&mut self, start: usize, plain: usize) -> Scanned<(Entry, usize)> {
        let key = self.escaped_string(start, plain)?;
        let (at, len) = (key.at as usize, key.len as usize);
        let entry = Entry {
            prefix: super::prefix(self.b.unescaped.get(at..at + len).ok_or(Fail)?),
            key,
            value: 0,
            escaped: true,
        };
        Ok((entry, self.pos))
    }
}
