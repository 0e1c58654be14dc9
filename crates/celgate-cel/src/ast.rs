//! The parsed CEL expression tree, with each node's place in the source.
//!
//! Macros (`has`, `all`, `exists`, `map`, the two-variable comprehensions, `sortBy`,
//! `optMap`...) are already expanded into [`ExprKind::Comprehension`] nodes or presence tests,
//! as cel-go's parser expands them; everything else is as written.

/// A byte range in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// The first byte.
    pub start: u32,
    /// The byte after the last.
    pub end: u32,
}

/// One node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// The source this node was parsed from.
    pub span: Span,
    /// The byte offset cel-go's parser gives this node, where its compile errors point: the
    /// operator token of an operator, the `(` of a call, the `.` of a selection, the `[` of
    /// an index, the `{` of a message literal, the `(` of the call a macro expands, the first
    /// token of anything else.
    pub pos: u32,
    /// What the node is.
    pub kind: ExprKind,
}

/// A constant as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `null`.
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// `1`, `-0x10`.
    Int(i64),
    /// `1u`.
    Uint(u64),
    /// `1.5`, `1e3`.
    Double(f64),
    /// `'text'`, with its escapes resolved.
    String(String),
    /// `b'bytes'`, with its escapes resolved.
    Bytes(Vec<u8>),
}

/// The kinds of node. Each field is the part of the source its name says.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// A constant.
    Literal(Literal),
    /// A name: a variable, or the first part of a dotted name.
    Ident(String),
    /// `operand.field`; `optional` for `operand.?field`.
    Select {
        operand: Box<Expr>,
        field: String,
        optional: bool,
    },
    /// `has(operand.field)`.
    Has { operand: Box<Expr>, field: String },
    /// `operand[index]`; `optional` for `operand[?index]`.
    Index {
        operand: Box<Expr>,
        index: Box<Expr>,
        optional: bool,
    },
    /// A function or operator call. Operators use cel-go's names (`_+_`, `!_`, `_?_:_`,
    /// `_&&_`, `@in`...); `target` is the receiver of a member call.
    Call {
        func: String,
        target: Option<Box<Expr>>,
        args: Vec<Expr>,
    },
    /// `[a, ?b]`: `optional[i]` marks an element written `?e`.
    List {
        elements: Vec<Expr>,
        optional: Vec<bool>,
    },
    /// `{k: v, ?k2: v2}`.
    Map { entries: Vec<MapEntry> },
    /// `a.b.Name{field: value}`, a message construction (dotted names as written).
    Struct {
        type_name: String,
        fields: Vec<FieldInit>,
    },
    /// An expanded comprehension macro.
    Comprehension(Box<Comprehension>),
}

/// One `field: value` of a message construction; `pos` is its `:`, where cel-go places it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldInit {
    /// The field's name.
    pub name: String,
    /// Its value.
    pub value: Expr,
    /// Written `?name: value` (set only when the value is present).
    pub optional: bool,
    /// The byte offset of the `:`.
    pub pos: u32,
}

/// One `key: value` of a map literal.
#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    /// The key.
    pub key: Expr,
    /// The value.
    pub value: Expr,
    /// Written `?key: value` (set only when the value is present).
    pub optional: bool,
}

/// The comprehension macros, each with the evaluation and cost semantics of its cel-go
/// expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacroKind {
    /// `all(x, p)` (and its two-variable form).
    All,
    /// `exists(x, p)` (and its two-variable form).
    Exists,
    /// `exists_one(x, p)` / `existsOne(x, p)` (and its two-variable form).
    ExistsOne,
    /// `map(x, t)`, or `map(x, filter, t)` when the comprehension has a filter.
    Map,
    /// `filter(x, p)`.
    Filter,
    /// Two-variable `transformList(i, v, [filter,] t)`.
    TransformList,
    /// Two-variable `transformMap(k, v, [filter,] t)`.
    TransformMap,
    /// Two-variable `transformMapEntry(k, v, [filter,] t)`.
    TransformMapEntry,
    /// `list.sortBy(x, key)` (ext.Lists v3).
    SortBy,
    /// `opt.optMap(x, t)`.
    OptMap,
    /// `opt.optFlatMap(x, t)`.
    OptFlatMap,
}

/// An expanded comprehension macro: `range.kind(var, [var2,] [filter,] body)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Comprehension {
    /// Which macro.
    pub kind: MacroKind,
    /// The macro's name as written (for messages: `existsOne` vs `exists_one`).
    pub name: &'static str,
    /// What is iterated over.
    pub range: Expr,
    /// The (first) iteration variable.
    pub var: String,
    /// The second iteration variable of a two-variable comprehension.
    pub var2: Option<String>,
    /// The optional filter (`map(x, p, t)`, `transformList(i, v, p, t)`...).
    pub filter: Option<Expr>,
    /// The predicate or transform.
    pub body: Expr,
}

impl Expr {
    /// The children of this node, for passes that only need to walk the tree.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Literal(_) | ExprKind::Ident(_) => Vec::new(),
            ExprKind::Struct { fields, .. } => fields.iter().map(|f| &f.value).collect(),
            ExprKind::Select { operand, .. } | ExprKind::Has { operand, .. } => vec![operand],
            ExprKind::Index { operand, index, .. } => vec![operand, index],
            ExprKind::Call { target, args, .. } => {
                target.iter().map(|t| &**t).chain(args).collect()
            }
            ExprKind::List { elements, .. } => elements.iter().collect(),
            ExprKind::Map { entries } => entries.iter().flat_map(|e| [&e.key, &e.value]).collect(),
            ExprKind::Comprehension(c) => {
                let mut v = vec![&c.range];
                v.extend(c.filter.as_ref());
                v.push(&c.body);
                v
            }
        }
    }
}
