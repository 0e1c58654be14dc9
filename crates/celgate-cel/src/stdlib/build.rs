//! Building results under the meter: a string or a list counted against the memory ceiling
//! as it grows, with the deadline watched, and a piece of a string borrowed where it can be.

use crate::ctx::Ctx;
use crate::error::EvalError;
use crate::meter::{Ticker, STEPS_PER_CHECK};
use crate::overload::{str_arg, R};
use crate::value::{Str, Value};

/// `s[range]` as a value: borrowed when `orig` (whose text `s` is) is borrowed for `'a`,
/// else copied, the copy counted against the memory ceiling.
pub(super) fn piece<'a>(
    cx: &mut Ctx<'_>,
    orig: &Value<'a>,
    range: std::ops::Range<usize>,
) -> R<'a> {
    if let Some(b) = orig.borrowed_str() {
        return Ok(Value::String(Str::Borrowed(b.get(range).unwrap_or(""))));
    }
    let s = str_arg(orig)?.get(range).unwrap_or("");
    cx.alloc_string(s.len())?;
    Ok(Value::string(s))
}

/// A string about to be built, counted against the memory ceiling as it grows and watching
/// the deadline.
pub(super) struct Out<'c, 'x> {
    pub(super) s: String,
    pub(super) cx: &'c mut Ctx<'x>,
    pub(super) ticker: Ticker,
}

impl<'c, 'x> Out<'c, 'x> {
    pub(super) fn new(cx: &'c mut Ctx<'x>) -> Self {
        let ticker = cx.ticker(STEPS_PER_CHECK);
        Out {
            s: String::new(),
            cx,
            ticker,
        }
    }

    pub(super) fn push_str(&mut self, t: &str) -> Result<(), EvalError> {
        self.ticker.bytes(t.len())?;
        self.cx.alloc(t.len())?;
        self.s.push_str(t);
        Ok(())
    }

    pub(super) fn push(&mut self, c: char) -> Result<(), EvalError> {
        self.push_str(c.encode_utf8(&mut [0; 4]))
    }

    /// A string built apart, to be appended later, on this one's deadline count.
    pub(super) fn part(&mut self) -> Out<'_, 'x> {
        Out {
            s: String::new(),
            cx: &mut *self.cx,
            ticker: self.ticker,
        }
    }

    /// The text built, and the deadline count to go on with.
    pub(super) fn finish(self) -> (String, Ticker) {
        (self.s, self.ticker)
    }

    /// Appends text that was counted when it was built.
    pub(super) fn push_counted(&mut self, t: &str) -> Result<(), EvalError> {
        self.ticker.bytes(t.len())?;
        self.s.push_str(t);
        Ok(())
    }

    pub(super) fn value<'a>(self) -> Value<'a> {
        Value::string(self.s)
    }
}

/// A list built element by element, each slot counted against the memory ceiling and the
/// deadline watched.
pub(super) struct ListBuilder<'c, 'x, 'a> {
    out: Vec<Value<'a>>,
    pub(super) cx: &'c mut Ctx<'x>,
    pub(super) ticker: Ticker,
}

impl<'c, 'x, 'a> ListBuilder<'c, 'x, 'a> {
    pub(super) fn new(cx: &'c mut Ctx<'x>) -> Self {
        let ticker = cx.ticker(STEPS_PER_CHECK);
        ListBuilder {
            out: Vec::new(),
            cx,
            ticker,
        }
    }

    pub(super) fn push(&mut self, v: Value<'a>) -> Result<(), EvalError> {
        self.ticker.tick()?;
        self.cx.alloc_values(1)?;
        self.out.push(v);
        Ok(())
    }

    pub(super) fn value(self) -> Value<'a> {
        Value::list(self.out)
    }
}
