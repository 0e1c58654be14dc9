//! The CEL standard library and the cel-go extensions Kubernetes enables, one concept per
//! file, each holding its implementations and its `register()`, the entries of the function
//! table ([`super::overload`]). [`super::library`] puts them together with the Kubernetes
//! libraries of [`super::k8s`].

pub mod arithmetic;
mod build;
pub mod comparison;
pub mod conversions;
pub mod format;
pub mod lists;
pub mod optional;
pub mod regex;
pub mod sets;
pub mod strings;
pub mod time;

use super::overload::Builder;

/// Registers every function of this folder. A function's overloads are tried in the order
/// they are registered; each function is registered by one library.
pub(super) fn register(b: &mut Builder) {
    arithmetic::register(b);
    comparison::register(b);
    lists::register(b);
    strings::register(b);
    regex::register(b);
    conversions::register(b);
    time::register(b);
    format::register(b);
    sets::register(b);
    optional::register(b);
}

/// Helpers for the libraries' tests.
#[cfg(test)]
mod test_support {
    use crate::ctx::Ctx;
    use crate::meter::Meter;
    use crate::overload::{CxImp, R};
    use crate::regex::RegexCache;
    use crate::value::{Str, Value};

    pub fn text(v: R<'_>) -> String {
        v.unwrap().as_str().unwrap().to_string()
    }

    /// Calls `f` with a fresh evaluation context.
    pub fn call<'a>(f: CxImp, args: &[Value<'a>]) -> R<'a> {
        let mut meter = Meter::default();
        let mut regexes = RegexCache::default();
        f(&mut Ctx::new(&mut meter, &mut regexes), args)
    }

    pub fn int(v: R<'_>) -> i64 {
        match v.unwrap() {
            Value::Int(i) => i,
            other => panic!("{other:?}"),
        }
    }

    /// A borrowed view of a string value, for tests.
    pub fn s(v: &str) -> Value<'_> {
        Value::String(Str::Borrowed(v))
    }
}
