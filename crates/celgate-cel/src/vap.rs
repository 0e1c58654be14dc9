//! The variables a ValidatingAdmissionPolicy expression sees, with Kubernetes' declared types
//! (`plugin/cel/compile.go`): `object`, `oldObject` and `params` are `dyn`; `request` is a
//! `kubernetes.AdmissionRequest` and `namespaceObject` a `kubernetes.Namespace`, whose
//! undeclared fields are compile errors.

use std::sync::{Arc, OnceLock};

use super::env::Env;
use super::types::{ObjectType, Type};

/// The slots of the VAP variables in an environment built by [`vap_env`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// `object`.
    pub object: usize,
    /// `oldObject`.
    pub old_object: usize,
    /// `request`.
    pub request: usize,
    /// `namespaceObject`.
    pub namespace_object: usize,
    /// `params`, when declared.
    pub params: Option<usize>,
    /// `authorizer`, when declared.
    pub authorizer: Option<usize>,
    /// `authorizer.requestResource`, when the authorizer is declared.
    pub request_resource: Option<usize>,
}

/// Which optional variables an expression kind declares (`plugin/cel/compile.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decls {
    /// `params`: only when the policy has a paramKind.
    pub params: bool,
    /// `authorizer` and `authorizer.requestResource`: for validations, matchConditions,
    /// variables and audit annotations, not for messageExpression.
    pub authorizer: bool,
}

fn object(name: &str, fields: &[(&str, Type)]) -> Type {
    Type::Object(Arc::new(ObjectType {
        name: name.to_string(),
        fields: fields
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect(),
    }))
}

/// `kubernetes.AdmissionRequest` (§6.3).
pub fn request_type() -> Type {
    static T: OnceLock<Type> = OnceLock::new();
    T.get_or_init(|| {
        let gvk = object(
            "kubernetes.GroupVersionKind",
            &[
                ("group", Type::String),
                ("version", Type::String),
                ("kind", Type::String),
            ],
        );
        let gvr = object(
            "kubernetes.GroupVersionResource",
            &[
                ("group", Type::String),
                ("version", Type::String),
                ("resource", Type::String),
            ],
        );
        let user = object(
            "kubernetes.UserInfo",
            &[
                ("username", Type::String),
                ("uid", Type::String),
                ("groups", Type::list(Type::String)),
                ("extra", Type::map(Type::String, Type::list(Type::String))),
            ],
        );
        object(
            "kubernetes.AdmissionRequest",
            &[
                ("kind", gvk.clone()),
                ("resource", gvr.clone()),
                ("subResource", Type::String),
                ("requestKind", gvk),
                ("requestResource", gvr),
                ("requestSubResource", Type::String),
                ("name", Type::String),
                ("namespace", Type::String),
                ("operation", Type::String),
                ("userInfo", user),
                ("dryRun", Type::Bool),
                ("options", Type::Dyn),
            ],
        )
    })
    .clone()
}

/// `kubernetes.Namespace` (§6.4): only these fields compile.
pub fn namespace_type() -> Type {
    static T: OnceLock<Type> = OnceLock::new();
    T.get_or_init(|| {
        let strings = Type::map(Type::String, Type::String);
        let metadata = object(
            "kubernetes.NamespaceMetadata",
            &[
                ("name", Type::String),
                ("generateName", Type::String),
                ("namespace", Type::String),
                ("labels", strings.clone()),
                ("annotations", strings),
                ("UID", Type::String),
                ("creationTimestamp", Type::Timestamp),
                ("deletionGracePeriodSeconds", Type::Int),
                ("deletionTimestamp", Type::Timestamp),
                ("generation", Type::Int),
                ("resourceVersion", Type::String),
                ("finalizers", Type::list(Type::String)),
            ],
        );
        let spec = object(
            "kubernetes.NamespaceSpec",
            &[("finalizers", Type::list(Type::String))],
        );
        let condition = object(
            "kubernetes.NamespaceCondition",
            &[
                ("status", Type::String),
                ("type", Type::String),
                ("lastTransitionTime", Type::Timestamp),
                ("message", Type::String),
                ("reason", Type::String),
            ],
        );
        let status = object(
            "kubernetes.NamespaceStatus",
            &[
                ("conditions", Type::list(condition)),
                ("phase", Type::String),
            ],
        );
        object(
            "kubernetes.Namespace",
            &[("metadata", metadata), ("spec", spec), ("status", status)],
        )
    })
    .clone()
}

/// The type Kubernetes declares a composited variable with, from its expression's type `t`
/// (`convertCelTypeToDeclType`): scalars keep theirs, lists and maps theirs element by
/// element; anything else (an optional, a type value, a library or object type, a type left
/// free) is `dyn`.
pub fn composited_type(t: &Type) -> Type {
    match t {
        Type::Bool
        | Type::Bytes
        | Type::Double
        | Type::Duration
        | Type::Int
        | Type::Null
        | Type::String
        | Type::Timestamp
        | Type::Uint => t.clone(),
        Type::List(e) => Type::list(composited_type(e)),
        Type::Map(k, v) => Type::map(composited_type(k), composited_type(v)),
        _ => Type::Dyn,
    }
}

/// An environment with the VAP variables declared.
pub fn vap_env(version: u16, decls: Decls) -> (Env, Slots) {
    vap_env_typed(version, decls, Type::Dyn, Type::Dyn)
}

/// [`vap_env`] with `object` and `oldObject` declared as `object`, and `params` (when
/// declared) as `params`: the environment of the API server's type checking of policies,
/// which types them from the schemas of the matched kinds and of the paramKind.
pub fn vap_env_typed(version: u16, decls: Decls, object: Type, params: Type) -> (Env, Slots) {
    let mut env = Env::new(version);
    let old_object = object.clone();
    let object = env.declare("object", object);
    let old_object = env.declare("oldObject", old_object);
    let request = env.declare("request", request_type());
    let namespace_object = env.declare("namespaceObject", namespace_type());
    let params = decls.params.then(|| env.declare("params", params));
    let (authorizer, request_resource) = if decls.authorizer {
        let a = env.declare("authorizer", Type::Opaque(super::k8s::authz::AUTHORIZER));
        let r = env.declare(
            "authorizer.requestResource",
            Type::Opaque(super::k8s::authz::RESOURCE_CHECK),
        );
        (Some(a), Some(r))
    } else {
        (None, None)
    };
    let slots = Slots {
        object,
        old_object,
        request,
        namespace_object,
        params,
        authorizer,
        request_resource,
    };
    (env, slots)
}

/// The attributes `authorizer.requestResource` presets from an AdmissionRequest: the
/// request's original resource group and resource, its subresource, namespace and name.
pub fn request_resource_attributes(
    request: &serde_json::Value,
) -> super::k8s::authz::ResourceAttributes {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    let resource = &request["requestResource"];
    let resource = if resource.is_object() {
        resource
    } else {
        &request["resource"]
    };
    super::k8s::authz::ResourceAttributes {
        group: text(&resource["group"]),
        resource: text(&resource["resource"]),
        subresource: text(&request["subResource"]),
        namespace: text(&request["namespace"]),
        name: text(&request["name"]),
        field_selector: None,
        label_selector: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Message construction names a declared object type; its fields are checked as cel-go
    /// checks them (the error points at the field's `:`), and building one fails at run time.
    #[test]
    fn message_construction_checks_the_declared_object_types() {
        let (env, _) = vap_env(
            super::super::NEWEST_MINOR,
            Decls {
                params: false,
                authorizer: false,
            },
        );
        let err = |src: &str| env.compile(src).unwrap_err().to_string();
        assert!(err("kubernetes.Namespace{metadata: {}}").starts_with(
            "ERROR: <input>:1:30: expected type of field 'metadata' is \
             'kubernetes.NamespaceMetadata' but provided type is 'map(_var0, _var1)'"
        ));
        assert!(err("kubernetes.Namespace{nope: 1}").contains("undefined field 'nope'"));
        assert!(err("Foo{a: 1}").contains("undeclared reference to 'Foo' (in container '')"));
        assert!(err("object.spec{}").contains("undeclared reference to 'object.spec'"));
        let p = env.compile("kubernetes.Namespace{}").unwrap();
        assert_eq!(p.result_type().to_string(), "kubernetes.Namespace");
    }

    /// `expr` evaluated in the newest VAP environment with every variable null: its result
    /// (or error text) and its cost.
    fn run(expr: &str) -> (Result<crate::Value<'static>, String>, u64) {
        let (env, _) = vap_env(
            super::super::NEWEST_MINOR,
            Decls {
                params: true,
                authorizer: false,
            },
        );
        let program = env.compile(expr).unwrap();
        let vars = vec![crate::Value::Null; env.variables().len()];
        let mut meter = crate::Meter::default();
        let r = program.eval(&vars, &mut meter).map_err(|e| e.to_string());
        (r, meter.cost)
    }

    /// cel-go's `evalObj` (interpreter/interpretable.go) evaluates the fields, then asks the
    /// type provider for the value; its cost observer charges the creation
    /// (`StructCreateBaseCost`, interpreter/runtimecost.go) whatever the outcome.
    #[test]
    fn constructing_a_declared_object_type_is_charged_before_it_fails() {
        let (r, cost) = run("kubernetes.AdmissionRequest{}");
        assert_eq!(r.unwrap_err(), "unknown type 'kubernetes.AdmissionRequest'");
        assert_eq!(cost, 40);
        let (r, cost) = run("kubernetes.AdmissionRequest{name: 'a' + 'b'}");
        assert!(r.is_err());
        assert_eq!(cost, 41, "the field's concatenation, then the creation");
    }

    /// cel-go's `checkCreateStruct` (checker/checker.go) resolves the message name as an
    /// identifier: a variable's type, not being a type of types, is `not a type`.
    #[test]
    fn a_message_named_after_a_variable_is_not_a_type() {
        let (env, _) = vap_env(
            super::super::NEWEST_MINOR,
            Decls {
                params: true,
                authorizer: false,
            },
        );
        let err = |src: &str| env.compile(src).unwrap_err().to_string();
        assert!(err("object{}").starts_with("ERROR: <input>:1:7: 'dyn' is not a type"));
        assert!(err("params{}").contains("'dyn' is not a type"));
        assert!(err("request{}").contains("'kubernetes.AdmissionRequest' is not a type"));
    }

    /// cel-go's `refQualify` (interpreter/attributes.go): under a presence test, a value that
    /// is neither a list, a map nor a message has no element, whatever the index's kind; the
    /// unfound optional qualifier is not observed, so not charged.
    #[test]
    fn an_optional_index_on_a_scalar_is_none() {
        for expr in [
            "dyn(1)[?0]",
            "dyn('abc')[?0]",
            "dyn(true)[?'a']",
            "dyn(null)[?1u]",
            "dyn(b'x')[?0]",
            "object[?'a']",
        ] {
            let (r, _) = run(expr);
            assert!(
                matches!(r, Ok(crate::Value::Optional(None))),
                "{expr}: {r:?}"
            );
        }
        assert_eq!(run("dyn(1)[0]").0.unwrap_err(), "no such key: 0");
        let (r, cost) = run("dyn([1])[?'a']");
        assert_eq!(r.unwrap_err(), "unsupported index type 'string' in list");
        assert_eq!(cost, 1, "dyn() alone: the failed qualifier is not observed");
    }

    #[test]
    fn composited_variables_keep_scalar_list_and_map_types_only() {
        let opt = |t: Type| Type::Optional(Box::new(t));
        assert_eq!(composited_type(&Type::Int), Type::Int);
        assert_eq!(
            composited_type(&Type::map(Type::String, Type::list(opt(Type::Int)))),
            Type::map(Type::String, Type::list(Type::Dyn))
        );
        assert_eq!(composited_type(&opt(Type::String)), Type::Dyn);
        assert_eq!(
            composited_type(&Type::Opaque("kubernetes.Quantity")),
            Type::Dyn
        );
        assert_eq!(
            composited_type(&Type::TypeOf(Box::new(Type::Int))),
            Type::Dyn
        );
        assert_eq!(composited_type(&request_type()), Type::Dyn);
    }

    #[test]
    fn request_and_namespace_fields_are_checked() {
        let (env, _) = vap_env(
            super::super::NEWEST_MINOR,
            Decls {
                params: false,
                authorizer: false,
            },
        );
        assert!(env
            .compile("request.operation == 'CREATE' && request.userInfo.groups.size() > 0")
            .is_ok());
        assert!(env.compile("has(request.namespace)").is_ok());
        let e = env.compile("request.foo1 == 'x'").unwrap_err();
        assert!(e.message().contains("undefined field 'foo1'"), "{e}");
        assert!(env
            .compile("request.userInfo.foo5")
            .unwrap_err()
            .message()
            .contains("undefined field 'foo5'"));
        assert!(env.compile("namespaceObject.metadata.UID == 'x'").is_ok());
        assert!(env
            .compile("namespaceObject.metadata.uid")
            .unwrap_err()
            .message()
            .contains("undefined field 'uid'"));
        assert!(env
            .compile("namespaceObject.metadata.managedFields")
            .is_err());
        assert!(env
            .compile(
                "type(namespaceObject.metadata.creationTimestamp) == google.protobuf.Timestamp"
            )
            .is_ok());
        let e = env.compile("params.x").unwrap_err();
        assert!(
            e.message().contains("undeclared reference to 'params'"),
            "{e}"
        );
        assert!(env.compile("request.uid").is_err());
    }

    #[test]
    fn a_bare_object_field_is_dyn() {
        let (env, _) = vap_env(
            super::super::NEWEST_MINOR,
            Decls {
                params: true,
                authorizer: true,
            },
        );
        assert_eq!(
            env.compile("object.spec.paused").unwrap().result_type(),
            &Type::Dyn
        );
        assert_eq!(
            env.compile("object.spec.paused == true")
                .unwrap()
                .result_type(),
            &Type::Bool
        );
    }
}
