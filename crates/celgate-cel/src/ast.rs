//! The parsed CEL expression tree, with each node's place in the source.
//!
//! Macros (`has`, `all`, `exists`, `map`, the two-variable comprehensions, `sortBy`,
//! `optMap`...) are already expanded into [`ExprKind::Comprehension`] nodes or presence tests,
//! as cel-go's parser expands them; everything else is as written.

/// A byte range in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub span: Span,
    /// The byte offset cel-go's parser gives this node, where its compile errors point: the
    /// operator token of an operator, the `(` of a call, the `.` of a selection, the `[` of
    /// an index, the `{` of a message literal, the `(` of the call a macro expands, the first
    /// token of anything else.
    pub pos: u32,
    pub kind: ExprKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Literal(Literal),
    Ident(String),
    /// `operand.field`; `optional` for `operand.?field`.
    Select {
        operand: Box<Expr>,
        field: String,
        optional: bool,
    },
    /// `has(operand.field)`.
    Has {
        operand: Box<Expr>,
        field: String,
    },
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
    List {
        elements: Vec<Expr>,
        optional: Vec<bool>,
    },
    Map {
        entries: Vec<MapEntry>,
    },
    /// `a.b.Name{field: value}`, a message construction (dotted names as written).
    Struct {
        type_name: String,
        fields: Vec<FieldInit>,
    },
    Comprehension(Box<Comprehension>),
}

/// One `field: value` of a message construction; `pos` is its `:`, where cel-go places it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldInit {
    pub name: String,
    pub value: Expr,
    pub optional: bool,
    pub pos: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    pub key: Expr,
    pub value: Expr,
    pub optional: bool,
}

/// The comprehension macros, each with the evaluation and cost semantics of its cel-go
/// expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacroKind {
    All,
    Exists,
    ExistsOne,
    /// `map(x, t)`, or `map(x, filter, t)` when the comprehension has a filter.
    Map,
    Filter,
    /// Two-variable `transformList(i, v, [filter,] t)`.
    TransformList,
    TransformMap,
    TransformMapEntry,
    /// `list.sortBy(x, key)` (ext.Lists v3).
    SortBy,
    /// `opt.optMap(x, t)`.
    OptMap,
    /// `opt.optFlatMap(x, t)`.
    OptFlatMap,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comprehension {
    pub kind: MacroKind,
    /// The macro's name as written (for messages: `existsOne` vs `exists_one`).
    pub name: &'static str,
    pub range: Expr,
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
