//! What a compiled ValidatingAdmissionPolicy can read of the review's `object` and
//! `oldObject`: the union of the reads of every expression that compiled (matchConditions,
//! variables in declaration order, validations and their messageExpressions, audit
//! annotations), from [`celgate_cel::reads`]. An expression that did not compile is never
//! evaluated (it yields its compilation error), so it reads nothing. No Kubernetes
//! counterpart: the API server decodes the whole object.

use celgate_cel::reads::{Analysis, Reads, Source};

use super::compile::{Compiled, CompiledPolicy};

/// The reads of `policy`'s expressions, compiled for Kubernetes 1.`version`; whole when an
/// expression that compiled does not parse again (it cannot happen; whole is the safe
/// answer).
pub fn policy_reads(policy: &CompiledPolicy, version: u16) -> Reads {
    analyse(policy, version).unwrap_or_else(|_| Reads::whole())
}

fn analyse(policy: &CompiledPolicy, version: u16) -> Result<Reads, celgate_cel::CompileError> {
    fn source(c: &Compiled) -> Option<&str> {
        c.as_ref().ok().map(|p| p.source())
    }
    let variables = policy
        .variables
        .iter()
        .map(|(name, c)| Source::Variable(name, source(c)));
    let exprs = policy
        .match_conditions
        .iter()
        .map(|(_, c)| c)
        .chain(
            policy
                .validations
                .iter()
                .flat_map(|v| std::iter::once(&v.program).chain(v.message_program.as_ref())),
        )
        .chain(policy.audit_annotations.iter().map(|(_, c)| c))
        .filter_map(|c| source(c).map(Source::Expr));
    let sources: Vec<Source<'_>> = variables.chain(exprs).collect();
    let mut a = Analysis::new();
    a.sources(&sources, version)?;
    Ok(a.reads())
}

#[cfg(test)]
mod tests {
    use celgate_cel::reads::show;

    fn reads_of(yaml: &str) -> (String, String) {
        let policy: crate::model::Policy = serde_yaml_ng::from_str(yaml).unwrap();
        let compiled = super::super::compile::compile(&policy, celgate_cel::NEWEST_MINOR);
        let r = &compiled.reads;
        (show(&r.object), show(&r.old_object))
    }

    #[test]
    fn every_expression_kind_of_a_policy_is_read() {
        let (object, old) = reads_of(
            "metadata: {name: p}
spec:
  matchConditions: [{name: c, expression: 'object.metadata.namespace != \"x\"'}]
  variables:
  - {name: spec, expression: object.spec}
  - {name: broken, expression: 'object.nope +'}
  validations:
  - expression: variables.spec.replicas < 5
    messageExpression: \"'has ' + string(oldObject.spec.replicas)\"
  auditAnnotations: [{key: k, valueExpression: \"string(object.status.phase)\"}]
",
        );
        assert_eq!(
            object,
            "{metadata:{namespace:*},spec:{replicas:*},status:{phase:*}}"
        );
        assert_eq!(old, "{spec:{replicas:*}}");
    }
}
