//! Static CEL types, as the checker sees them, and the compact signature syntax the
//! function table is written in.

use std::fmt;
use std::sync::Arc;

/// A CEL type, as the checker infers and declarations state them.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// `dyn`: checked at run time.
    Dyn,
    /// `null_type`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `google.protobuf.Duration`.
    Duration,
    /// `list(T)`.
    List(Box<Type>),
    /// `map(K, V)`.
    Map(Box<Type>, Box<Type>),
    /// The type of a type value: `int` has type `type(int)`.
    TypeOf(Box<Type>),
    /// `optional_type(T)`.
    Optional(Box<Type>),
    /// A Kubernetes library type (`kubernetes.URL`, `net.IP`...).
    Opaque(&'static str),
    /// A declared object type with known fields (`kubernetes.AdmissionRequest`).
    Object(Arc<ObjectType>),
    /// A protobuf wrapper type (`google.protobuf.Int64Value`...): a primitive that is also
    /// nullable, as cel-go's `NewNullableType` makes it; printed `wrapper(int)`.
    Wrapper(Box<Type>),
    /// A type parameter of a signature (`A`, `B`, `K`, `V`), or in an expression's type
    /// (`FREE`) a type cel-go leaves as a type variable: the element type of an empty
    /// literal, the unbound result parameter of `optional.none()`. It unifies with whatever
    /// meets it and is `dyn` if nothing does.
    Param(u8),
}

/// The free type variable of an expression's type (see [`Type::Param`]).
pub const FREE: Type = Type::Param(0);

/// cel-go v0.22.0's nil `*types.Type`: the type its checker gives the second variable of a
/// two-variable comprehension over a `dyn` range (`checker/checker.go`, `checkComprehension`
/// sets `var2Type` only for list and map ranges; fixed by cel-go #1077, v0.22.1). Its kind is
/// unspecified and its name empty (`common/types/types.go`: `Kind()`, `TypeName()` on nil),
/// so it prints as `''`, supports no field selection, matches no concrete parameter, is not
/// nullable and does not even join with itself; a type parameter or `dyn` accepts it.
pub const UNSET: Type = Type::Opaque("");

/// An object type whose fields are declared, so selecting an undeclared field is a compile
/// error (`undefined field 'x'`).
#[derive(Debug, PartialEq)]
pub struct ObjectType {
    /// The type's CEL name.
    pub name: String,
    /// The declared fields, in declaration order.
    pub fields: Vec<(String, Type)>,
}

impl ObjectType {
    /// The declared type of field `name`.
    pub fn field(&self, name: &str) -> Option<&Type> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

impl Type {
    /// The type with every free variable (see [`Type::Param`]) replaced by `dyn`, as cel-go
    /// reports a type variable nothing bound.
    pub fn settled(&self) -> Type {
        match self {
            Type::Param(_) => Type::Dyn,
            Type::List(e) => Type::list(e.settled()),
            Type::Map(k, v) => Type::map(k.settled(), v.settled()),
            Type::Optional(e) => Type::Optional(Box::new(e.settled())),
            Type::TypeOf(e) => Type::TypeOf(Box::new(e.settled())),
            other => other.clone(),
        }
    }

    /// The type with a free variable at its top (not inside) replaced by `dyn`.
    pub fn settled_top(&self) -> Type {
        match self {
            Type::Param(_) => Type::Dyn,
            other => other.clone(),
        }
    }

    /// Whether `self` and `other` are the same type once free variables take the type
    /// they meet (`list(int)` and the type of `[]`).
    pub fn unifies_with(&self, other: &Type) -> bool {
        match (self, other) {
            (Type::Param(_), _) | (_, Type::Param(_)) => true,
            (Type::List(x), Type::List(y))
            | (Type::Optional(x), Type::Optional(y))
            | (Type::TypeOf(x), Type::TypeOf(y)) => x.unifies_with(y),
            (Type::Map(xk, xv), Type::Map(yk, yv)) => xk.unifies_with(yk) && xv.unifies_with(yv),
            (x, y) => x == y,
        }
    }

    /// Whether the type holds a free variable (see [`Type::Param`]).
    pub fn has_free(&self) -> bool {
        match self {
            Type::Param(_) => true,
            Type::List(e) | Type::Optional(e) | Type::TypeOf(e) => e.has_free(),
            Type::Map(k, v) => k.has_free() || v.has_free(),
            _ => false,
        }
    }

    /// The type with each free variable replaced by what stands at its place in `with`
    /// (the matched signature's parameter with its bindings).
    pub fn filled(&self, with: &Type) -> Type {
        match (self, with) {
            (Type::Param(_), _) => with.clone(),
            (Type::List(e), Type::List(w)) => Type::list(e.filled(w)),
            (Type::Optional(e), Type::Optional(w)) => Type::Optional(Box::new(e.filled(w))),
            (Type::TypeOf(e), Type::TypeOf(w)) => Type::TypeOf(Box::new(e.filled(w))),
            (Type::Map(k, v), Type::Map(wk, wv)) => Type::map(k.filled(wk), v.filled(wv)),
            _ => self.clone(),
        }
    }

    /// `list(t)`.
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    /// `map(k, v)`.
    pub fn map(k: Type, v: Type) -> Type {
        Type::Map(Box::new(k), Box::new(v))
    }

    /// Whether `null` passes for a value of this type. cel-go's checker keeps its legacy
    /// rule: null is assignable to messages (objects), the well-known Timestamp and Duration
    /// messages, and opaque types (optionals and the Kubernetes library types), so
    /// `null + null` and `int(null)` compile and fail at run time.
    pub fn nullable(&self) -> bool {
        // cel-go's nil type has no kind that `isLegacyNullable` accepts (see [`UNSET`]).
        *self != UNSET
            && matches!(
                self,
                Type::Null
                    | Type::Timestamp
                    | Type::Duration
                    | Type::Optional(_)
                    | Type::Opaque(_)
                    | Type::Object(_)
                    | Type::Wrapper(_)
            )
    }

    /// Whether this is `dyn`.
    pub fn is_dyn(&self) -> bool {
        matches!(self, Type::Dyn)
    }

    /// The runtime type name a value of this static type has (`type(x)`).
    pub fn runtime_name(&self) -> Option<&'static str> {
        Some(match self {
            Type::Null => "null_type",
            Type::Bool => "bool",
            Type::Int => "int",
            Type::Uint => "uint",
            Type::Double => "double",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Timestamp => "google.protobuf.Timestamp",
            Type::Duration => "google.protobuf.Duration",
            Type::List(_) => "list",
            Type::Map(..) => "map",
            Type::TypeOf(_) => "type",
            Type::Optional(_) => "optional_type",
            Type::Opaque(n) => n,
            Type::Wrapper(t) => return t.runtime_name(),
            _ => return None,
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Null => f.write_str("null_type"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::List(e) => write!(f, "list({e})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::TypeOf(t) => write!(f, "type({t})"),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::Opaque(n) => f.write_str(n),
            Type::Object(o) => f.write_str(&o.name),
            Type::Wrapper(t) => write!(f, "wrapper({t})"),
            // cel-go prints a type variable left unbound as `dyn`.
            Type::Param(0) => f.write_str("dyn"),
            Type::Param(p) => write!(f, "{}", *p as char),
        }
    }
}

/// Parses a type in signature syntax: `int`, `list(A)`, `map(K, V)`, `optional(A)`,
/// `type(A)`, `dyn`, a single capital letter for a type parameter, or a dotted opaque name.
/// The table is written by us, so a malformed entry is a programming error caught by tests.
pub fn parse_type(s: &str) -> Type {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix("list(").and_then(|r| r.strip_suffix(')')) {
        return Type::list(parse_type(inner));
    }
    if let Some(inner) = s.strip_prefix("map(").and_then(|r| r.strip_suffix(')')) {
        let (k, v) = split_top(inner);
        return Type::map(parse_type(k), parse_type(v));
    }
    if let Some(inner) = s
        .strip_prefix("optional(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return Type::Optional(Box::new(parse_type(inner)));
    }
    if let Some(inner) = s.strip_prefix("type(").and_then(|r| r.strip_suffix(')')) {
        return Type::TypeOf(Box::new(parse_type(inner)));
    }
    match s {
        "dyn" => Type::Dyn,
        "null" => Type::Null,
        "bool" => Type::Bool,
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "timestamp" => Type::Timestamp,
        "duration" => Type::Duration,
        p if p.len() == 1 && p.as_bytes()[0].is_ascii_uppercase() => Type::Param(p.as_bytes()[0]),
        other => Type::Opaque(opaque_name(other)),
    }
}

/// Interns the opaque type names the libraries use, so types carry `&'static str`.
fn opaque_name(s: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "kubernetes.URL",
        "kubernetes.Quantity",
        "kubernetes.Semver",
        "kubernetes.NamedFormat",
        "net.IP",
        "net.CIDR",
        "kubernetes.authorization.Authorizer",
        "kubernetes.authorization.PathCheck",
        "kubernetes.authorization.GroupCheck",
        "kubernetes.authorization.ResourceCheck",
        "kubernetes.authorization.Decision",
    ];
    NAMES
        .iter()
        .find(|n| **n == s)
        .copied()
        .unwrap_or("unknown")
}

/// Splits `a, b` at the top-level comma.
pub fn split_top(s: &str) -> (&str, &str) {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => return (&s[..i], &s[i + 1..]),
            _ => {}
        }
    }
    (s, "")
}

/// A parsed signature: `recv.(p1, p2) result` for member functions, `(p1, p2) result` for
/// global ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// A member function (`recv.f(...)`), whose first parameter is the receiver.
    pub member: bool,
    /// Parameter types, the receiver first for a member function.
    pub params: Vec<Type>,
    /// The result type.
    pub result: Type,
}

pub fn parse_signature(sig: &str) -> Signature {
    let (member, rest, receiver) = match sig.find(".(") {
        Some(i) if !sig.starts_with('(') => (true, &sig[i + 1..], Some(parse_type(&sig[..i]))),
        _ => (false, sig, None),
    };
    let close = matching_paren(rest);
    let inner = &rest[1..close];
    let mut params: Vec<Type> = receiver.into_iter().collect();
    let mut remaining = inner;
    while !remaining.trim().is_empty() {
        let (head, tail) = split_top(remaining);
        params.push(parse_type(head));
        remaining = tail;
    }
    let result = parse_type(&rest[close + 1..]);
    Signature {
        member,
        params,
        result,
    }
}

fn matching_paren(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// Type parameter bindings while matching one overload.
#[derive(Default)]
pub struct Bindings {
    bound: Vec<(u8, Type)>,
}

impl Bindings {
    /// Whether an argument of type `actual` can be passed where `formal` is expected,
    /// binding type parameters on the way. `dyn` is compatible with everything.
    pub fn accepts(&mut self, formal: &Type, actual: &Type) -> bool {
        match (formal, actual) {
            (Type::Param(p), _) => match self.bound.iter().position(|(q, _)| q == p) {
                Some(i) => {
                    let prev = self.bound[i].1.clone();
                    if let Some(joined) = join(&prev, actual) {
                        self.bound[i].1 = joined;
                        true
                    } else {
                        false
                    }
                }
                None => {
                    self.bound.push((*p, actual.clone()));
                    true
                }
            },
            (Type::Dyn, _) | (_, Type::Dyn) => true,
            // `google.protobuf.Any` is a wildcard as `dyn` is (cel-go checker/types.go
            // `isDyn`: `DynKind, AnyKind`).
            (Type::Opaque("google.protobuf.Any"), _) | (_, Type::Opaque("google.protobuf.Any")) => {
                true
            }
            // A free variable of the argument's type (`[]`'s element) takes any type.
            (_, Type::Param(_)) => true,
            (Type::List(f), Type::List(a)) => self.accepts(f, a),
            (Type::Map(fk, fv), Type::Map(ak, av)) => self.accepts(fk, ak) && self.accepts(fv, av),
            (Type::Optional(f), Type::Optional(a)) => self.accepts(f, a),
            (Type::TypeOf(f), Type::TypeOf(a)) => {
                let mut probe = Bindings {
                    bound: self.bound.clone(),
                };
                if probe.accepts(f, a) {
                    self.bound = probe.bound;
                }
                true
            }
            (Type::Object(f), Type::Object(a)) => f.name == a.name,
            // A wrapper has its primitive's kind and name, and also takes null (cel-go's
            // `internalIsAssignable` defers to `NewNullableType`'s assignability).
            (Type::Wrapper(f), a) => matches!(a, Type::Null) || self.accepts(f, a),
            (f, Type::Wrapper(a)) => matches!(f, Type::Null) || self.accepts(f, a),
            (f, Type::Null) => f.nullable(),
            (Type::Null, a) => a.nullable(),
            (f, a) => f == a,
        }
    }

    /// `t` with bound parameters substituted; unbound ones become free variables
    /// ([`FREE`]), as cel-go gives them fresh type variables.
    pub fn substitute(&self, t: &Type) -> Type {
        match t {
            Type::Param(p) => self
                .bound
                .iter()
                .find(|(q, _)| q == p)
                .map_or(FREE, |(_, b)| self.substitute(b)),
            Type::List(e) => Type::list(self.substitute(e)),
            Type::Map(k, v) => Type::map(self.substitute(k), self.substitute(v)),
            Type::Optional(e) => Type::Optional(Box::new(self.substitute(e))),
            Type::TypeOf(e) => Type::TypeOf(Box::new(self.substitute(e))),
            other => other.clone(),
        }
    }
}

/// The common type of two types bound to one parameter: equal types join to themselves,
/// `dyn` joins with anything to `dyn`; other pairs do not join (no matching overload).
pub fn join(a: &Type, b: &Type) -> Option<Type> {
    match (a, b) {
        (Type::Dyn, _) | (_, Type::Dyn) => Some(Type::Dyn),
        // A free variable takes the other side's type (`true ? [1] : []` is `list(int)`).
        (Type::Param(_), _) => Some(b.clone()),
        (_, Type::Param(_)) => Some(a.clone()),
        (Type::List(x), Type::List(y)) => join(x, y).map(Type::list),
        (Type::Map(xk, xv), Type::Map(yk, yv)) => Some(Type::map(join(xk, yk)?, join(xv, yv)?)),
        (Type::Optional(x), Type::Optional(y)) => join(x, y).map(|t| Type::Optional(Box::new(t))),
        // Type values all have kind `type`: `type(1) == type(1u)` is well typed (and false).
        (Type::TypeOf(x), Type::TypeOf(y)) => {
            Some(Type::TypeOf(Box::new(join(x, y).unwrap_or(Type::Dyn))))
        }
        // A wrapper is exactly its primitive for cel-go's `IsExactType` (same kind and name).
        (Type::Wrapper(x), y) | (y, Type::Wrapper(x)) if **x == *y => Some(a.clone()),
        (Type::Null, _) if b.nullable() => Some(b.clone()),
        (_, Type::Null) if a.nullable() => Some(a.clone()),
        // cel-go's nil type is exact with nothing, not even itself (`isTypeInternal`).
        (x, y) if x == y && *x != UNSET => Some(x.clone()),
        // `google.protobuf.Any` joins as `dyn` does (`isDyn`).
        (Type::Opaque("google.protobuf.Any"), _) | (_, Type::Opaque("google.protobuf.Any")) => {
            Some(Type::Dyn)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_parse() {
        let s = parse_signature("map(K, V).(K) bool");
        assert!(s.member);
        assert_eq!(s.params.len(), 2);
        assert_eq!(s.params[0].to_string(), "map(K, V)");
        let g = parse_signature("(A, list(A)) bool");
        assert!(!g.member);
        assert_eq!(g.params[1], Type::list(Type::Param(b'A')));
        assert_eq!(parse_signature("() optional(A)").params.len(), 0);
    }

    #[test]
    fn parameters_bind_and_join() {
        let mut b = Bindings::default();
        assert!(b.accepts(&Type::Param(b'A'), &Type::Int));
        assert!(!b.accepts(&Type::Param(b'A'), &Type::String));
        assert!(b.accepts(&Type::Param(b'A'), &Type::Dyn));
        assert_eq!(
            b.substitute(&Type::list(Type::Param(b'A'))),
            Type::list(Type::Dyn)
        );
    }
    #[test]
    fn a_free_type_joins_and_fills_with_what_it_meets() {
        let free_list = Type::list(FREE);
        assert_eq!(
            join(&free_list, &Type::list(Type::Int)),
            Some(Type::list(Type::Int))
        );
        assert_eq!(
            join(&Type::list(Type::Int), &free_list),
            Some(Type::list(Type::Int))
        );
        assert_eq!(join(&free_list, &Type::String), None);
        assert!(free_list.unifies_with(&Type::list(Type::Bool)));
        assert!(!free_list.unifies_with(&Type::map(Type::Int, Type::Int)));
        assert_eq!(
            free_list.filled(&Type::list(Type::Double)),
            Type::list(Type::Double)
        );
        assert_eq!(
            Type::map(FREE, Type::list(FREE)).settled(),
            Type::map(Type::Dyn, Type::list(Type::Dyn))
        );
        // An unbound result parameter is free, not `dyn`.
        let b = Bindings::default();
        assert_eq!(
            b.substitute(&Type::Optional(Box::new(Type::Param(b'A')))),
            Type::Optional(Box::new(FREE))
        );
    }

    #[test]
    fn null_passes_for_messages_well_known_and_opaque_types_only() {
        let mut b = Bindings::default();
        for nullable in [
            Type::Timestamp,
            Type::Duration,
            Type::Opaque("net.IP"),
            Type::Optional(Box::new(Type::Int)),
        ] {
            assert!(b.accepts(&nullable, &Type::Null), "{nullable}");
            assert!(b.accepts(&Type::list(nullable.clone()), &Type::list(Type::Null)));
            assert_eq!(join(&Type::Null, &nullable), Some(nullable.clone()));
            assert_eq!(join(&nullable, &Type::Null), Some(nullable.clone()));
        }
        for plain in [Type::Int, Type::String, Type::Bytes, Type::list(Type::Int)] {
            assert!(!b.accepts(&plain, &Type::Null), "{plain}");
            assert_eq!(join(&Type::Null, &plain), None);
        }
    }
}
