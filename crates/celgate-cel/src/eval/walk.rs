//! Attribute chains read in a document in place: `object.spec.containers[0].image` walks the
//! request's [`Ref`]s from the variable to the last field, making a [`Value`] only of what it
//! ends on, instead of one per step.
//!
//! Each step charges what [`Evaluator::eval`] charges for it (the head identifier 1, each
//! selection or index its `cost`), in the same order and before its lookup, so a cost-limit
//! stop happens at the same step; a step that finds nothing goes on through the same
//! functions the general path uses (`select_in`, `index_value`), on the same value, so errors
//! are the same. A chain whose head is not a document container (an owned map, an
//! optional...) is left to the general path untouched: `None` is returned before anything is
//! charged.

use super::{has, index_value, select_in, Evaluator, Node, R};
use crate::error::EvalError;
use crate::json::Ref;
use crate::value::{List, Map, Value};

/// The longest chain walked (longer ones take the general path).
const MAX_STEPS: usize = 12;

/// The document container `v` views.
#[inline(always)]
fn doc_of<'a>(v: &Value<'a>) -> Option<Ref<'a, 'a>> {
    match v {
        Value::Map(Map::Doc(r)) | Value::List(List::Doc(r)) => Some(*r),
        _ => None,
    }
}

/// A step of a chain: a plain selection, or a plain index by a constant integer.
#[inline(always)]
fn step_operand(n: &Node) -> Option<&Node> {
    match n {
        Node::Select {
            operand,
            optional: false,
            ..
        } => Some(operand),
        Node::Index {
            operand,
            index,
            optional: false,
            ..
        } if matches!(**index, Node::Const(Value::Int(_))) => Some(operand),
        _ => None,
    }
}

/// A chain's steps, last first, and its head.
struct Chain<'n> {
    steps: [&'n Node; MAX_STEPS],
    len: usize,
    head: &'n Node,
}

impl<'n> Chain<'n> {
    #[inline(always)]
    fn of(n: &'n Node, step: fn(&Node) -> Option<&Node>) -> Option<Chain<'n>> {
        let mut c = Chain {
            steps: [n; MAX_STEPS],
            len: 0,
            head: n,
        };
        while let Some(operand) = step(c.head) {
            if c.len == MAX_STEPS {
                return None;
            }
            c.steps[c.len] = c.head;
            c.len += 1;
            c.head = operand;
        }
        (c.len > 0).then_some(c)
    }
}

impl<'a> Evaluator<'a, '_> {
    /// The document container a chain's head (a variable, a comprehension variable) views.
    #[inline(always)]
    fn doc_head(&self, head: &Node) -> Option<Ref<'a, 'a>> {
        match head {
            Node::Var(slot) => match self.act.var_ref(*slot) {
                Some(v) => doc_of(v),
                None => doc_of(&self.act.var(*slot)),
            },
            Node::Local(i) => self.locals.get(*i).and_then(doc_of),
            _ => None,
        }
    }

    /// Evaluates the chain `n` (plain selections and constant integer indexes down to a
    /// variable) in the document, as [`Evaluator::eval`] would; `None`, uncharged, when `n`
    /// is not such a chain on a document.
    #[inline]
    pub(super) fn walk(&mut self, n: &Node) -> Option<R<'a>> {
        let chain = Chain::of(n, step_operand)?;
        let mut at = self.doc_head(chain.head)?;
        let mut steps = chain.steps[..chain.len].iter().rev();
        if let (Node::Local(_), Node::Select { field, .. }) =
            (chain.head, chain.steps[chain.len - 1])
        {
            if matches!(at.item(), crate::json::Item::Object(_)) {
                // As `select_local` charges it: the variable and the selection at once.
                steps.next();
                if let Err(e) = self.meter.charge(2) {
                    return Some(Err(e));
                }
                match at.get_key(field) {
                    Some(c) => at = c,
                    None => return Some(Err(EvalError::no_such_key(field))),
                }
            } else if let Err(e) = self.meter.charge(1) {
                return Some(Err(e));
            }
        } else if let Err(e) = self.meter.charge(1) {
            return Some(Err(e));
        }
        while let Some(step) = steps.next() {
            let (found, cost) = match step {
                Node::Select { field, cost, .. } => (at.get_key(field), *cost),
                Node::Index { index, cost, .. } => match **index {
                    Node::Const(Value::Int(i)) => {
                        (usize::try_from(i).ok().and_then(|i| at.element(i)), *cost)
                    }
                    _ => (None, *cost),
                },
                _ => (None, 0),
            };
            if let Err(e) = self.meter.charge(u64::from(cost)) {
                return Some(Err(e));
            }
            match found {
                Some(c) => at = c,
                None => return Some(self.walk_missed(at, step, steps)),
            }
        }
        Some(Ok(Value::from_doc(at)))
    }

    /// The rest of a chain whose `step` (already charged) found nothing in the document
    /// node `at`: that step and the following ones as `eval` takes them, on values.
    #[cold]
    #[inline(never)]
    fn walk_missed<'n>(
        &mut self,
        at: Ref<'a, 'a>,
        step: &Node,
        rest: impl Iterator<Item = &'n &'n Node>,
    ) -> R<'a> {
        let mut v = match step {
            Node::Select { field, .. } => select_in(Value::from_doc(at), field, false, false)?,
            Node::Index { index, .. } => match &**index {
                Node::Const(k) => index_value(Value::from_doc(at), k, false)?,
                _ => return Err(EvalError::no_such_overload()),
            },
            _ => return Err(EvalError::no_such_overload()),
        };
        for step in rest {
            v = match step {
                Node::Select {
                    field,
                    explicit,
                    cost,
                    ..
                } => {
                    if matches!(v, Value::Optional(_)) {
                        let r = select_in(v, field, false, *explicit);
                        self.charge_optional(r, *cost)?
                    } else {
                        self.meter.charge(u64::from(*cost))?;
                        select_in(v, field, false, false)?
                    }
                }
                Node::Index { index, cost, .. } => {
                    let Node::Const(k) = &**index else {
                        return Err(EvalError::no_such_overload());
                    };
                    if matches!(v, Value::Optional(_)) {
                        let r = index_value(v, k, false);
                        let found = matches!(&r, Ok(x) if !matches!(x, Value::Optional(None)));
                        self.charge_index(found, true, false, *cost)?;
                        r?
                    } else {
                        self.meter.charge(u64::from(*cost))?;
                        index_value(v, k, false)?
                    }
                }
                _ => return Err(EvalError::no_such_overload()),
            };
        }
        Ok(v)
    }

    /// `has(chain.field)` with the chain (plain selections down to a variable) walked in the
    /// document, charged as [`Evaluator::presence_operand`] charges it: the head, then each
    /// selection once it found its field. `None`, uncharged, when it is not such a chain.
    #[inline]
    pub(super) fn has_walked(&mut self, operand: &Node, field: &crate::json::Key) -> Option<R<'a>> {
        fn select_step(n: &Node) -> Option<&Node> {
            match n {
                Node::Select {
                    operand,
                    optional: false,
                    ..
                } => Some(operand),
                _ => None,
            }
        }
        let chain = Chain::of(operand, select_step)?;
        let mut at = self.doc_head(chain.head)?;
        if let Err(e) = self.meter.charge(1) {
            return Some(Err(e));
        }
        for step in chain.steps[..chain.len].iter().rev() {
            let Node::Select { field, cost, .. } = step else {
                return Some(Err(EvalError::no_such_overload()));
            };
            // The relative attribute around a computed operand (never one here, every
            // operand being an attribute), charged whatever it found.
            let relative = u64::from(cost.saturating_sub(1));
            if relative > 0 {
                if let Err(e) = self.meter.charge(relative) {
                    return Some(Err(e));
                }
            }
            match at.get_key(field) {
                Some(c) => {
                    if let Err(e) = self.meter.charge(1) {
                        return Some(Err(e));
                    }
                    at = c;
                }
                // A document node is never optional: the plain selection's error.
                None => {
                    return Some(
                        select_in(Value::from_doc(at), field, false, false)
                            .and_then(|_| Err(EvalError::no_such_key(field))),
                    )
                }
            }
        }
        Some(has(&Value::from_doc(at), field))
    }
}

#[cfg(test)]
mod tests {
    use crate::json::Doc;
    use crate::vap::{vap_env, Decls};
    use crate::{Meter, Value, NEWEST_MINOR};

    const OBJECT: &str = r#"{"metadata": {"name": "web-1", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"hostPort": 0}]}],
                 "n": 3, "hostPID": null}}"#;

    /// The result (or error text) and the cost of `expr` on `object` with cost limit `limit`.
    fn run(expr: &str, object: Value<'_>, limit: u64) -> (String, u64) {
        let (env, _) = vap_env(
            NEWEST_MINOR,
            Decls {
                params: false,
                authorizer: false,
            },
        );
        let program = env.compile(expr).expect("compiles");
        let vars = [object, Value::Null, Value::Null, Value::Null];
        let mut meter = Meter::with_limit(limit);
        let r = match program.eval(&vars, &mut meter) {
            Ok(v) => v.debug_string(),
            Err(e) => format!("error: {e}"),
        };
        (r, meter.cost)
    }

    /// Chains walked in the document give what the general path gives on the same object
    /// held as `serde_json` values (which it never walks): the same value or error, and the
    /// same cost, at every cost limit, so a cost-limit stop falls on the same step.
    #[test]
    fn chains_walked_in_the_document_are_evaluated_and_charged_as_on_values() {
        let doc = Doc::parse(OBJECT.as_bytes()).expect("JSON");
        let json: serde_json::Value = serde_json::from_str(OBJECT).expect("JSON");
        let exprs = [
            "object.metadata.name",
            "object.metadata.name.startsWith('web')",
            "object.metadata.labels.a",
            "object.metadata.missing",
            "object.metadata.missing.deeper",
            "object.metadata.name.length",
            "object.spec.containers.name",
            "object.spec.containers[0].image",
            "object.spec.containers[0].ports[0].hostPort",
            "object.spec.containers[1].image",
            "object.spec.containers[-1]",
            "object.spec.n[0]",
            "object.metadata[0]",
            "object.spec.hostPID",
            "object.spec.hostPID.x",
            "object.spec.containers.all(c, c.ports[0].hostPort == 0)",
            "object.spec.containers.all(c, c.name.size() == 1)",
            "has(object.metadata.name)",
            "has(object.metadata.nope)",
            "has(object.metadata.nope.deeper)",
            "has(object.metadata.name.x)",
            "has(object.spec.containers.x)",
            "has(object.spec.hostPID.x)",
            "object.spec.containers.all(c, has(c.ports) && has(c.image))",
            "object.spec.containers.exists(c, has(c.securityContext.privileged))",
            "object.?metadata.name.orValue('x')",
            "object.metadata.?name.name",
        ];
        for expr in exprs {
            let (want, full) = run(expr, Value::from_json(&json), 1_000_000);
            for limit in (0..=full + 1).chain([1_000_000]) {
                assert_eq!(
                    run(expr, Value::from_doc(doc.root()), limit),
                    run(expr, Value::from_json(&json), limit),
                    "{expr} with limit {limit} (unlimited: {want}, cost {full})"
                );
            }
        }
    }
}
