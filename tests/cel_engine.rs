//! Behaviour of the Kubernetes CEL engine that the specs call out: cost limits and
//! cancellation, error absorption, version gating, compile-time checks, and results where
//! Kubernetes differs from documentation or from plain CEL.

use celgate::cel::Meter;
use std::sync::Arc;

use celgate::cel::k8s::authz::{
    Attributes, AuthorizeError, Authorizer, AuthorizerValue, Decision, Principal,
    ResourceAttributes, Target, Verdict,
};
use celgate::cel::vap::{vap_env, Decls};
use celgate::cel::{Env, Type, Value, NEWEST_MINOR, PER_CALL_LIMIT};
use serde_json::json;

/// Evaluates `expr` with `object` bound, in the newest VAP environment.
fn eval_with(expr: &str, object: serde_json::Value) -> Result<serde_json::Value, String> {
    eval_object(expr, Value::from_json(&object), |_| {})
}

/// Evaluates `expr` with `object` bound and a meter set up by `setup`.
fn eval_object(
    expr: &str,
    object: Value<'_>,
    setup: impl FnOnce(&mut Meter),
) -> Result<serde_json::Value, String> {
    eval_in(NEWEST_MINOR, expr, object, setup)
}

/// Evaluates `expr` in the VAP environment of Kubernetes 1.`minor`, with `object` bound and
/// a meter set up by `setup`.
fn eval_in(
    minor: u16,
    expr: &str,
    object: Value<'_>,
    setup: impl FnOnce(&mut Meter),
) -> Result<serde_json::Value, String> {
    let (env, slots) = vap_env(
        minor,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let program = env
        .compile(expr)
        .map_err(|e| format!("compile: {}", e.message()))?;
    let mut vars = vec![Value::Null; env.variables().len()];
    vars[slots.object] = object;
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    setup(&mut meter);
    program
        .eval(&vars, &mut meter)
        .map(|v| v.to_json())
        .map_err(|e| e.to_string())
}

fn eval(expr: &str) -> Result<serde_json::Value, String> {
    eval_with(expr, json!({}))
}

fn cost(expr: &str, object: serde_json::Value) -> u64 {
    let (cost, result) = cost_and_result(expr, object);
    result.unwrap();
    cost
}

/// What evaluating `expr` cost, and its value or error.
fn cost_and_result(
    expr: &str,
    object: serde_json::Value,
) -> (u64, Result<serde_json::Value, String>) {
    let (env, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let program = env.compile(expr).unwrap();
    let mut vars = vec![Value::Null; env.variables().len()];
    vars[slots.object] = Value::from_json(&object);
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let result = program
        .eval(&vars, &mut meter)
        .map(|v| v.to_json())
        .map_err(|e| e.to_string());
    (meter.cost, result)
}

#[test]
fn a_passed_deadline_interrupts_comprehensions_every_hundred_iterations() {
    let (env, _) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let run = |expr: &str| {
        let program = env.compile(expr).unwrap();
        let vars = vec![Value::Null; env.variables().len()];
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        meter.deadline = Some(std::time::Instant::now());
        program
            .eval(&vars, &mut meter)
            .map(|v| v.to_json())
            .map_err(|e| e.to_string())
    };
    // Fewer than 100 iterations never look at the clock.
    assert_eq!(run("lists.range(99).all(i, true)"), Ok(json!(true)));
    for expr in [
        "lists.range(100).all(i, true)",
        "lists.range(100).exists(i, false)",
        "lists.range(100).all(i, v, true)",
        "lists.range(100).map(i, i).size() > 0",
        "{'a': 1}.all(k, lists.range(200).exists_one(i, i == 0))",
        "lists.range(100).filter(i, true).size() > 0",
        "lists.range(100).transformList(i, v, v).size() > 0",
        "lists.range(100).transformMap(i, v, v).size() > 0",
        "lists.range(100).sortBy(i, -i).size() > 0",
    ] {
        assert_eq!(
            run(expr),
            Err("operation interrupted".to_string()),
            "{expr}"
        );
    }
}

#[test]
fn cost_limit_cancels_and_is_never_absorbed() {
    let heavy = "lists.range(2000).all(i, lists.range(2000).all(j, true))";
    assert_eq!(
        eval(heavy).unwrap_err(),
        "operation cancelled: actual cost limit exceeded"
    );
    // `true || <error>` is true, but a cancellation is not an ordinary error.
    assert_eq!(
        eval(&format!("true || {heavy}")).unwrap(),
        json!(true),
        "short-circuit skips the right side"
    );
    assert_eq!(
        eval(&format!("{heavy} || true")).unwrap_err(),
        "operation cancelled: actual cost limit exceeded"
    );
    assert_eq!(
        eval(&format!("[1].exists(x, {heavy})")).unwrap_err(),
        "operation cancelled: actual cost limit exceeded"
    );
}

#[test]
fn cost_follows_cel_go_units() {
    let obj = json!({"a": "x", "l": [1, 2, 3]});
    assert_eq!(
        cost("'x' == 'x'", obj.clone()),
        1,
        "constants cost nothing; == costs 1"
    );
    assert_eq!(
        cost("object.a == 'x'", obj.clone()),
        3,
        "ident 1 + select 1 + == 1"
    );
    assert_eq!(
        cost("has(object.a)", obj.clone()),
        1,
        "has() costs 0, its operand 1"
    );
    // Recorded from Kubernetes 1.32 (cel differential `std.collections`, `cost`): cel-go
    // turns `in` over a constant list of scalars into a set lookup its tracker does not
    // charge, and prices `in` by its size only when the checker resolved `in_list`.
    assert_eq!(
        cost("2 in [1, 2, 3]", obj.clone()),
        0,
        "a constant list of scalars is a set lookup, charged nothing"
    );
    assert_eq!(
        cost("2 in object.l", obj.clone()),
        3,
        "`in` on a dyn operand matches in_list and in_map: cel-go's default 1"
    );
    assert_eq!(
        cost("2 in [object.l[0], object.l[1]]", obj.clone()),
        2 * 3 + 10 + 2,
        "a built list: elements, creation 10, `in` its size"
    );
    // all(): range 2, then per element cond 2 + step 1 + predicate (ident 1 + > 1), result 1.
    assert_eq!(cost("object.l.all(x, x > 0)", obj), 2 + 3 * 5 + 1);
}

#[test]
fn logical_operators_absorb_errors_commutatively() {
    assert_eq!(eval("object.missing == 1 || true").unwrap(), json!(true));
    assert_eq!(eval("true || object.missing == 1").unwrap(), json!(true));
    assert_eq!(eval("object.missing == 1 && false").unwrap(), json!(false));
    assert!(eval("object.missing == 1 && true")
        .unwrap_err()
        .contains("no such key: missing"));
    assert_eq!(
        eval_with("object.l.all(x, 1 / x > 0)", json!({"l": [0, -1]})).unwrap(),
        json!(false)
    );
    assert!(
        eval_with("object.l.all(x, 1 / x > 0)", json!({"l": [0, 1]}))
            .unwrap_err()
            .contains("division by zero")
    );
    assert_eq!(
        eval_with("object.l.exists(x, 1 / x > 0)", json!({"l": [0, 1]})).unwrap(),
        json!(true)
    );
    assert!(eval_with("object.l.exists_one(x, 1 / x > 0)", json!({"l": [0, 1]})).is_err());
}

#[test]
fn runtime_data_follows_unstructured_json() {
    let obj = json!({"spec": {"replicas": 3, "ratio": 1.5}});
    assert_eq!(
        eval_with("object.spec.replicas + 1", obj.clone()).unwrap(),
        json!(4)
    );
    assert_eq!(
        eval_with("type(object.spec.replicas) == int", obj.clone()).unwrap(),
        json!(true)
    );
    assert_eq!(
        eval_with("type(object.spec.ratio) == double", obj.clone()).unwrap(),
        json!(true)
    );
    assert_eq!(
        eval_with("object.spec.replicas == 3.0", obj.clone()).unwrap(),
        json!(true),
        "dyn equality is heterogeneous"
    );
    assert_eq!(
        eval_with("object.spec.nope", obj).unwrap_err(),
        "no such key: nope"
    );
    assert_eq!(
        eval_with("object.metadata", json!(null)).unwrap_err(),
        "no such key: metadata"
    );
    assert_eq!(
        eval_with("object.?spec.?x.orValue(7)", json!({"spec": {}})).unwrap(),
        json!(7)
    );
}

#[test]
fn compile_time_checks() {
    let (env, _) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let err = |e: &str| env.compile(e).unwrap_err().message().to_string();
    assert!(err("1 == 'a'")
        .contains("found no matching overload for '_==_' applied to '(int, string)'"));
    assert!(
        err("1 == 1.0").contains("no matching overload"),
        "1.32 rejects 1 == 1.0 at compile time"
    );
    assert!(env.compile("dyn(1) == 1.0").is_ok());
    assert!(err("[1, 'a']").contains("expected type 'int' but found 'string'"));
    // `dyn` is a type of its own for Kubernetes' homogeneous literals (cel-go's validator
    // compares the checked types): found by the parse fuzzer, `[0, object]` was list(int).
    assert_eq!(err("[dyn(1), 2]"), "expected type 'dyn' but found 'int'");
    assert_eq!(err("[0, object]"), "expected type 'int' but found 'dyn'");
    assert_eq!(
        err("{'a': 1, 'b': object}"),
        "expected type 'int' but found 'dyn'"
    );
    assert!(env.compile("[object, object.spec, dyn(1)]").is_ok());
    // `optional.none()` takes the element type of the literal around it.
    for ok in [
        "[1, ?optional.none(), ?optional.of(2)]",
        "{?'a': optional.none(), 'b': 1}",
    ] {
        assert!(env.compile(ok).is_ok(), "{ok}");
    }
    assert!(
        env.compile("'%s %d'.format(['a', 1])").is_ok(),
        "format() arguments are exempt"
    );
    assert!(err("nosuchfn(1)").contains("undeclared reference to 'nosuchfn'"));
    assert!(err("'a'.matches('[')").contains("invalid matches argument"));
    assert!(
        err("duration('1d')").starts_with("invalid duration argument"),
        "constant durations are validated"
    );
    assert!(err("timestamp('2024-01-01')").starts_with("invalid timestamp argument"));
    assert!(err("true ? 'x' : null").contains("_?_:_"));
    assert!(
        err("'abc'.reverse()").contains("reverse"),
        "ext.Strings v3 is not enabled"
    );
    assert!(err("math.greatest(1, 2)").contains("undeclared reference"));
    assert!(err("base64.encode(b'a')").contains("undeclared reference"));
    assert_eq!(
        env.compile("object.spec.paused").unwrap().result_type(),
        &Type::Dyn
    );
}

#[test]
fn libraries_follow_the_compatibility_version() {
    let mut old = Env::new(28);
    old.declare("object", Type::Dyn);
    assert!(
        old.compile("sets.contains([1], [1])").is_err(),
        "sets arrive with 1.29"
    );
    assert!(
        old.compile("isIP('1.2.3.4')").is_err(),
        "ip arrives with 1.30"
    );
    assert!(
        old.compile("[1].all(i, v, v > 0)").is_err(),
        "two-variable comprehensions arrive with 1.32"
    );
    assert!(
        old.compile("[1].sort()").is_err(),
        "lists v3 arrives with 1.34"
    );
    assert!(old.compile("optional.of(1).hasValue()").is_ok());
    let new = Env::default();
    assert!(new
        .compile("sets.contains([1], [1]) && isIP('1.2.3.4') && [1].all(i, v, v > 0)")
        .is_ok());
}

#[test]
fn kubernetes_library_corner_cases() {
    // k8s-cel-library.md §18
    assert!(
        eval("ip.isCanonical('not-an-ip')").is_err(),
        "an invalid IP is an error, not false"
    );
    assert_eq!(eval("ip.isCanonical('2001:db8::68')").unwrap(), json!(true));
    assert_eq!(
        eval("ip.isCanonical('2001:DB8::68')").unwrap(),
        json!(false)
    );
    assert_eq!(
        eval("cidr('192.168.0.1/24').prefixLength()").unwrap(),
        json!(24),
        "host bits accepted"
    );
    assert_eq!(
        eval("cidr('192.168.0.1/24') == cidr('192.168.0.0/24')").unwrap(),
        json!(false)
    );
    assert_eq!(
        eval("string(cidr('192.168.0.1/24').masked())").unwrap(),
        json!("192.168.0.0/24")
    );
    assert_eq!(
        eval("ip('192.168.0.1').isGlobalUnicast()").unwrap(),
        json!(true),
        "RFC 1918 is global unicast"
    );
    assert!(eval("ip('::ffff:1.2.3.4')")
        .unwrap_err()
        .contains("IPv4-mapped"));
    // Go's FindAllString keeps empty matches, except one abutting the previous match.
    assert_eq!(
        eval("'1, 2'.findAll('[0-9]*')").unwrap(),
        json!(["1", "", "2"]),
        "empty matches are kept"
    );
    assert_eq!(
        eval("'abc 123 def 456'.find('[0-9]+')").unwrap(),
        json!("123")
    );
    assert!(eval("'x'.find(object.p)").is_err());
    assert_eq!(eval("[3, 1, 2].max()").unwrap(), json!(3));
    assert!(eval("[].min()")
        .unwrap_err()
        .contains("min called on empty list"));
    assert_eq!(eval("[1, 2, 2].isSorted()").unwrap(), json!(true));
    assert_eq!(eval("[1, 2, 3].indexOf(2)").unwrap(), json!(1));
    assert_eq!(
        eval("'hello'.indexOf('l', 10)").unwrap(),
        json!(-1),
        "cel-go v0.26: -1 past the end"
    );
}

#[test]
fn strings_and_time() {
    assert_eq!(
        eval("'%e'.format([12345.678])").unwrap(),
        // golang.org/x/text's rendering, as Kubernetes 1.32 returns it: narrow no-break
        // spaces around the sign.
        json!("1.234568\u{202f}×\u{202f}10⁰⁴")
    );
    assert_eq!(eval("'%s'.format([[1, 2]])").unwrap(), json!("[1, 2]"));
    assert!(eval("'%d'.format([1.5])").is_err());
    assert_eq!(eval("string(1.0 / 0.0)").unwrap(), json!("+Inf"));
    assert_eq!(
        eval("timestamp('2024-03-01T10:00:00Z').getMonth()").unwrap(),
        json!(2),
        "0-based"
    );
    assert_eq!(
        eval("timestamp('2024-03-01T10:00:00Z').getDayOfMonth()").unwrap(),
        json!(0),
        "0-based"
    );
    assert_eq!(
        eval("timestamp('2024-03-01T10:00:00Z').getHours('America/Los_Angeles')").unwrap(),
        json!(2)
    );
    assert_eq!(
        eval("timestamp('2024-03-01T10:00:00Z').getHours('+05:30')").unwrap(),
        json!(15)
    );
    assert_eq!(eval("string(duration('1h30m'))").unwrap(), json!("5400s"));
    assert_eq!(eval("duration('1h').getMinutes()").unwrap(), json!(60));
    assert_eq!(eval("'héllo'.size()").unwrap(), json!(5), "code points");
    assert_eq!(
        eval("[1, 2, 3].transformMap(i, v, v * 2)").unwrap(),
        json!({"0": 2, "1": 4, "2": 6})
    );
    assert_eq!(eval("[3, 1, 2].sortBy(x, -x)").unwrap(), json!([3, 2, 1]));
}

/// Allows `get` on pods for the request user, and `get /healthz`; no opinion otherwise.
#[derive(Debug)]
struct PodReader;

impl Authorizer for PodReader {
    fn authorize(&self, a: &Attributes) -> Result<Decision, AuthorizeError> {
        let allow = match (&a.principal, &a.target) {
            (Principal::RequestUser, Target::Resource(r)) => {
                a.verb == "get" && r.resource == "pods" && r.group.is_empty()
            }
            (_, Target::Path(p)) => p == "/healthz" && a.verb == "get",
            _ => false,
        };
        let verdict = if allow {
            Verdict::Allow
        } else {
            Verdict::NoOpinion
        };
        Ok(Decision {
            verdict,
            reason: format!("{:?}", a.target),
            error: None,
        })
    }
}

fn eval_authz(expr: &str) -> Result<serde_json::Value, String> {
    let (env, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: true,
        },
    );
    let program = env
        .compile(expr)
        .map_err(|e| format!("compile: {}", e.message()))?;
    let mut vars = vec![Value::Null; env.variables().len()];
    let authz = AuthorizerValue::new(Arc::new(PodReader));
    let preset = ResourceAttributes {
        resource: "pods".into(),
        namespace: "default".into(),
        name: "web".into(),
        ..Default::default()
    };
    vars[slots.request_resource.unwrap()] = Value::opaque(authz.request_resource(preset));
    vars[slots.authorizer.unwrap()] = Value::opaque(authz);
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    program
        .eval(&vars, &mut meter)
        .map(|v| v.to_json())
        .map_err(|e| e.to_string())
}

#[test]
fn authorizer_checks() {
    assert_eq!(
        eval_authz(
            "authorizer.group('').resource('pods').namespace('default').check('get').allowed()"
        )
        .unwrap(),
        json!(true)
    );
    assert_eq!(
        eval_authz("authorizer.group('').resource('pods').check('delete').allowed()").unwrap(),
        json!(false)
    );
    assert_eq!(
        eval_authz("authorizer.requestResource.check('get').allowed()").unwrap(),
        json!(true)
    );
    assert_eq!(
        eval_authz("authorizer.path('/healthz').check('get').allowed()").unwrap(),
        json!(true)
    );
    assert_eq!(eval_authz("authorizer.serviceAccount('default', 'builder').group('').resource('pods').check('get').allowed()").unwrap(), json!(false));
    assert_eq!(
        eval_authz("authorizer.path(' ')").unwrap_err(),
        "path must not be empty"
    );
    assert_eq!(
        eval_authz("authorizer.group('').resource('')").unwrap_err(),
        "resource must not be empty"
    );
    assert_eq!(
        eval_authz("authorizer.serviceAccount('default', 'Bad_Name')").unwrap_err(),
        "Invalid service account name"
    );
    assert_eq!(
        eval_authz("authorizer.serviceAccount('Bad.NS', 'ok')").unwrap_err(),
        "Invalid service account namespace"
    );
    assert_eq!(
        eval_authz("authorizer.path('/x').check('get').errored()").unwrap(),
        json!(false)
    );
    // 350,000 per check: three checks exceed the per-expression limit.
    let three = "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
    assert_eq!(
        eval_authz(three).unwrap_err(),
        "operation cancelled: actual cost limit exceeded"
    );
    // Not declared for messageExpression.
    let (msg_env, _) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    assert!(msg_env
        .compile("authorizer.path('/x').check('get').allowed()")
        .unwrap_err()
        .message()
        .contains("undeclared reference to 'authorizer'"));
}

#[test]
fn quantity_semver_url_format_libraries() {
    // k8s-cel-library.md §18: documentation mismatches, each checked against the declarations.
    let (env, _) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    assert_eq!(
        eval("sign(quantity('-1'))").unwrap(),
        json!(-1),
        "sign is a global overload"
    );
    assert!(env
        .compile("quantity('1').sign()")
        .unwrap_err()
        .message()
        .contains("no matching overload"));
    assert!(env
        .compile("quantity('50k').add('20k')")
        .unwrap_err()
        .message()
        .contains("no matching overload"));
    assert!(
        env.compile("ip('1.2.3.4').isCanonical()").is_err(),
        "ip.isCanonical is a global function of a string"
    );
    assert_eq!(
        eval("format.dns1123Label().validate('Not Valid').hasValue()").unwrap(),
        json!(true),
        "hasValue means invalid"
    );
    assert_eq!(
        eval("format.dns1123Label().validate('valid').hasValue()").unwrap(),
        json!(false)
    );

    assert_eq!(
        eval("quantity('50k').add(20) == quantity('50020')").unwrap(),
        json!(true)
    );
    assert_eq!(
        eval("quantity('50M').isLessThan(quantity('50Mi'))").unwrap(),
        json!(true)
    );
    assert_eq!(
        eval("quantity('200M') == quantity('0.2G')").unwrap(),
        json!(true)
    );
    assert_eq!(eval("quantity('1.5').isInteger()").unwrap(), json!(false));
    assert_eq!(
        eval("quantity('1.5').asApproximateFloat()").unwrap(),
        json!(1.5)
    );
    assert!(eval("quantity('1.5').asInteger()")
        .unwrap_err()
        .contains("cannot convert value to integer"));
    assert!(eval("quantity('200K')").is_err());
    assert_eq!(eval("isQuantity('200K')").unwrap(), json!(false));

    assert_eq!(
        eval("semver('1.2.3').isLessThan(semver('1.10.0'))").unwrap(),
        json!(true)
    );
    assert_eq!(
        eval("semver('1.0.0+a') == semver('1.0.0+b')").unwrap(),
        json!(true),
        "build metadata is ignored"
    );
    assert_eq!(eval("semver('v1.2', true).minor()").unwrap(), json!(2));
    assert_eq!(eval("isSemver('v1.2.3')").unwrap(), json!(false));
    assert_eq!(
        eval("semver('1.0.0-alpha').compareTo(semver('1.0.0'))").unwrap(),
        json!(-1)
    );

    assert_eq!(
        eval("url('https://example.com:8443/a b?x=1&x=2').getEscapedPath()").unwrap(),
        json!("/a%20b")
    );
    assert_eq!(
        eval("url('https://example.com:8443/').getPort()").unwrap(),
        json!("8443")
    );
    assert_eq!(
        eval("url('https://[::1]:80/').getHostname()").unwrap(),
        json!("::1")
    );
    assert_eq!(
        eval("url('https://example.com/?x=1&x=2').getQuery()").unwrap(),
        json!({"x": ["1", "2"]})
    );
    assert_eq!(
        eval("url('HTTPS://Example.com/').getScheme()").unwrap(),
        json!("https")
    );
    assert_eq!(
        eval("url('https://Example.com/').getHost()").unwrap(),
        json!("Example.com"),
        "no host lower-casing"
    );
    assert_eq!(eval("isURL('relative/path')").unwrap(), json!(false));
    assert!(eval("url('https://a:b:c/')")
        .unwrap_err()
        .starts_with("URL parse error during conversion from string"));

    assert_eq!(
        eval("format.named('dns1123Label').hasValue() && !format.named('nope').hasValue()")
            .unwrap(),
        json!(true)
    );
    assert_eq!(
        eval("format.uuid().validate('not-a-uuid').value()").unwrap(),
        json!(["does not match the UUID format"])
    );
    assert_eq!(
        eval("string(timestamp('9999-12-31T23:59:59.999999999Z'))").unwrap(),
        json!("9999-12-31T23:59:59.999999999Z")
    );
}

// ---------------------------------------------------------------------------------------
// Memory and time bombs (issue 10): every builder's memory bounded, every long operation
// stopped by the deadline, run-time regexes cached and bounded.

/// A policy's composited variables evaluated as the admission layer does: each compiled
/// against those declared before it, evaluated on first use with a meter of its own, its
/// value cached.
struct Vars<'a, 'p> {
    programs: &'p [celgate::cel::Program],
    values: &'p [Value<'a>],
    cache: std::cell::RefCell<Vec<Option<Result<Value<'a>, celgate::cel::EvalError>>>>,
    /// Bytes built by each variable's evaluation.
    memory: std::cell::RefCell<Vec<u64>>,
}

impl<'a> celgate::cel::Activation<'a> for Vars<'a, '_> {
    fn var(&self, slot: usize) -> Value<'a> {
        self.values.get(slot).cloned().unwrap_or(Value::Null)
    }

    fn lazy(&self, index: usize) -> Result<Value<'a>, celgate::cel::EvalError> {
        if let Some(Some(v)) = self.cache.borrow().get(index) {
            return v.clone();
        }
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        let r = self.programs[index].eval(self, &mut meter);
        self.memory.borrow_mut().push(meter.memory);
        self.cache.borrow_mut()[index] = Some(r.clone());
        r
    }
}

/// The environment with `variables` declared (name, expression), each compiled in order.
fn with_variables(vars: &[(String, String)]) -> (Env, usize, Vec<celgate::cel::Program>) {
    let (base, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let mut fields = Vec::new();
    let mut programs = Vec::new();
    for (name, expr) in vars {
        let mut env = base.clone();
        env.declare_lazy("variables", fields.clone());
        let p = env.compile(expr).unwrap_or_else(|e| panic!("{name}: {e}"));
        fields.push((name.clone(), p.result_type().clone()));
        programs.push(p);
    }
    let mut env = base;
    env.declare_lazy("variables", fields);
    (env, slots.object, programs)
}

/// `l0` a list of 1,000 ints, each next variable the previous one concatenated to itself.
fn doubling(times: usize) -> Vec<(String, String)> {
    let mut vars = vec![("l0".to_string(), "lists.range(1000)".to_string())];
    for i in 1..=times {
        vars.push((
            format!("l{i}"),
            format!("variables.l{} + variables.l{}", i - 1, i - 1),
        ));
    }
    vars
}

#[test]
fn a_list_doubled_forty_times_is_a_view_not_a_copy() {
    let vars = doubling(40);
    let (env, object, programs) = with_variables(&vars);
    let size = 1000u64 << 40;
    let object_json = json!({});
    let mut values = vec![Value::Null; env.variables().len()];
    values[object] = Value::from_json(&object_json);
    let act = Vars {
        programs: &programs,
        values: &values,
        cache: std::cell::RefCell::new(vec![None; programs.len()]),
        memory: std::cell::RefCell::new(Vec::new()),
    };
    let run = |expr: &str| {
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        let r = env
            .compile(expr)
            .unwrap()
            .eval(&act, &mut meter)
            .map(|v| v.to_json())
            .map_err(|e| e.to_string());
        (r, meter.cost)
    };
    assert_eq!(
        run("size(variables.l40)").0,
        Ok(json!(size)),
        "the size is kept, not counted"
    );
    // Indexing walks down the tree: element i is i % 1000 everywhere.
    for i in [0, 999, 1000, 123_456_789_012, size - 1] {
        assert_eq!(
            run(&format!("variables.l40[{i}]")).0,
            Ok(json!(i % 1000)),
            "[{i}]"
        );
    }
    assert!(run(&format!("variables.l40[{size}]")).0.is_err());
    // Iteration walks it in place: exists() stops at the first match, charged per element.
    let (found, cost) = run("variables.l40.exists(x, x == 999)");
    assert_eq!(found, Ok(json!(true)));
    assert!(cost < 10_000, "{cost}");
    assert_eq!(
        run("variables.l40.exists_one(x, x == 5)").0,
        Err("operation cancelled: actual cost limit exceeded".to_string()),
        "walking it all is charged per element"
    );
    // `in` is charged the list's size (cel-go): within the limit on l9, not on l40.
    assert_eq!(run("999 in variables.l9").0, Ok(json!(true)));
    assert_eq!(run("1000 in variables.l9").0, Ok(json!(false)));
    assert_eq!(
        run("999 in variables.l40").0,
        Err("operation cancelled: actual cost limit exceeded".to_string())
    );
    assert_eq!(
        run("variables.l2 == lists.range(1000) + lists.range(1000) + lists.range(2000).map(x, x % 1000)").0,
        Ok(json!(true))
    );
    assert_eq!(
        run("variables.l3.slice(3995, 4000)").0,
        Ok(json!([995, 996, 997, 998, 999]))
    );
    // Each concatenation built a node, not a list: 40 variables, a few kilobytes in all
    // (l0's 1,000 slots aside).
    let memory: u64 = act.memory.borrow().iter().sum();
    assert!(memory < 64 << 10, "{memory} bytes built");
}

#[test]
fn what_the_view_would_flatten_stops_at_the_memory_ceiling() {
    let vars = doubling(40);
    let (env, object, programs) = with_variables(&vars);
    let object_json = json!({});
    let mut values = vec![Value::Null; env.variables().len()];
    values[object] = Value::from_json(&object_json);
    let act = Vars {
        programs: &programs,
        values: &values,
        cache: std::cell::RefCell::new(vec![None; programs.len()]),
        memory: std::cell::RefCell::new(Vec::new()),
    };
    // Each of these is charged a little (cel-go's units) and would build the whole list:
    // stopped by the ceiling (a small one here, to keep the test quick) or the cost limit,
    // never past the ceiling.
    for expr in [
        "'%s'.format([variables.l40]).size() > 0",
        "[variables.l40].flatten().size() > 0",
        "variables.l40.map(x, optional.of(x)).size() > 0",
        "[[variables.l40]].flatten(2).size() > 0",
        "variables.l40.slice(0, 100000000).size() > 0",
    ] {
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        meter.memory_limit = 4 << 20;
        let r = env.compile(expr).unwrap().eval(&act, &mut meter);
        let e = r.expect_err(expr);
        assert!(e.is_cancelled(), "{expr}: {e}");
        assert!(
            meter.memory <= 4 << 20,
            "{expr}: {} bytes built",
            meter.memory
        );
    }
    // With the default ceiling, the one cheapest by cost and heaviest by memory.
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    let e = env
        .compile("[variables.l40].flatten().size() > 0")
        .unwrap()
        .eval(&act, &mut meter)
        .unwrap_err();
    assert_eq!(e.to_string(), "operation cancelled: memory limit exceeded");
    assert_eq!(
        e.cancel_reason(),
        Some(celgate::cel::CancelReason::MemoryLimit)
    );
}

/// Evaluates `expr` over `object` with a meter set up by `setup`.
fn eval_metered(
    expr: &str,
    object: &serde_json::Value,
    setup: impl FnOnce(&mut Meter),
) -> (Result<serde_json::Value, celgate::cel::EvalError>, Meter) {
    let (env, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    let program = env.compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut vars = vec![Value::Null; env.variables().len()];
    vars[slots.object] = Value::from_json(object);
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    setup(&mut meter);
    let r = program.eval(&vars, &mut meter).map(|v| v.to_json());
    (r, meter)
}

#[test]
fn builders_stop_at_the_memory_ceiling_with_a_clear_error() {
    let object = json!({
        "s": "a".repeat(2000),
        "big": "b".repeat(4000),
        "huge": "c".repeat(40000),
        "words": vec!["x".repeat(600); 1000],
    });
    // Each is within the cost limit and builds over 1 MiB.
    for expr in [
        "lists.range(40000).size() > 0",
        "object.s.replace('', object.big).size() > 0",
        "object.s.replace('a', object.big).size() > 0",
        "object.huge.split('').size() > 0",
        "object.words.join(object.big).size() > 0",
        "'%s'.format([lists.range(30).map(i, object.words)]).size() > 0",
        "'%.2000000f'.format([1.5]).size() > 0",
        "'%x'.format([object.words.join('')]).size() > 0",
        "[object.words, object.words, object.words].flatten().map(w, w + w).size() > 0",
        "lists.range(200).map(i, object.big + object.s).size() > 0",
        "object.huge.findAll('').size() > 0",
        "lists.range(3000).map(i, [i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i]).size() > 0",
    ] {
        let (r, meter) = eval_metered(expr, &object, |m| m.memory_limit = 1 << 20);
        let e = r.expect_err(expr);
        assert_eq!(
            e.to_string(),
            "operation cancelled: memory limit exceeded",
            "{expr}"
        );
        assert_eq!(
            e.cancel_reason(),
            Some(celgate::cel::CancelReason::MemoryLimit)
        );
        assert!(meter.cost < PER_CALL_LIMIT, "{expr}");
        // Under the default ceiling, the same expression evaluates.
        let (r, _) = eval_metered(expr, &object, |_| {});
        assert_eq!(r.unwrap(), json!(true), "{expr}");
    }
    // A memory stop is a cancellation: `||` does not absorb it.
    let (r, _) = eval_metered("lists.range(40000).size() > 0 || true", &object, |m| {
        m.memory_limit = 1 << 20
    });
    assert!(r.unwrap_err().is_cancelled());
}

/// Issue 24 item 12b: `split('')` builds a one-character string per character, each a heap
/// block of its own beside its list slot: a string that fits the ceiling alone (20,000
/// characters, 20 kB) splits into a list that does not (over a megabyte in fact), and stops
/// with the memory error instead of building it.
#[test]
fn split_pieces_are_counted_at_their_real_size() {
    let object = json!({"s": "a".repeat(20_000)});
    // `+ 'b'` makes the receiver a built string, so its pieces are copies, not borrowed.
    let expr = "(object.s + 'b').split('').size() > 0";
    let (r, meter) = eval_metered(expr, &object, |m| m.memory_limit = 1 << 20);
    assert_eq!(
        r.expect_err(expr).to_string(),
        "operation cancelled: memory limit exceeded",
        "{} bytes counted",
        meter.memory
    );
    let (r, _) = eval_metered(expr, &object, |_| {});
    assert_eq!(r.unwrap(), json!(true));
}

#[test]
fn a_runtime_regex_is_compiled_once_per_evaluation_and_charged_each_time() {
    // The pattern (from the object) is past Go's repeat limit: it is refused once, then from
    // the cache.
    let containers: Vec<_> = (0..200)
        .map(|i| json!({"name": format!("c-{i}")}))
        .collect();
    let expr = "object.spec.containers.all(c, !c.name.matches(object.metadata.?annotations.?re.orValue('^$')))";
    let run = |re: &str| {
        let object = json!({
            "metadata": {"annotations": {"re": re}},
            "spec": {"containers": containers},
        });
        let start = std::time::Instant::now();
        let (r, meter) = eval_metered(expr, &object, |_| {});
        (r, meter, start.elapsed())
    };
    let (r, meter, elapsed) = run(r"\pL{1001}");
    assert_eq!(
        r.unwrap_err().to_string(),
        "error parsing regexp: invalid repeat count: `{1001}`"
    );
    assert_eq!(meter.regexes_compiled, 1, "199 cache hits");
    // 200 calls, each charged ⌈0.1·(1+4)⌉·⌈0.25·9⌉ = 3 (names `c-0`...`c-199`: 3 to 5
    // characters, ⌈0.1·6⌉ = 1) as cel-go charges a run-time pattern, whether it compiles or not.
    assert!(meter.cost >= 200 * 3, "{}", meter.cost);
    assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");

    // A valid pattern: compiled once, charged per call as well.
    let (r, ok_meter, _) = run("^x-[0-9]+$");
    assert_eq!(r.unwrap(), json!(true));
    assert_eq!(ok_meter.regexes_compiled, 1);
    assert!(ok_meter.cost >= 200 * 3);

    // Distinct patterns per element: each refused once, fast.
    let object = json!({"spec": {"containers": (0..200)
        .map(|i| json!({"name": format!("\\pL{{{}}}", 1001 + i)}))
        .collect::<Vec<_>>()}});
    let start = std::time::Instant::now();
    let (r, meter) = eval_metered(
        "object.spec.containers.all(c, !'x'.matches(c.name))",
        &object,
        |_| {},
    );
    assert!(r.is_err());
    assert_eq!(meter.regexes_compiled, 200);
    assert!(start.elapsed() < std::time::Duration::from_secs(10));

    // Patterns Go accepts but whose automata here would be large (`\pL{300}`, megabytes, a
    // hundred milliseconds to build): run as Go runs them, each compiled in microseconds.
    let object = json!({"spec": {"containers": (0..200)
        .map(|i| json!({"name": format!("\\pL{{{}}}", 300 + i)}))
        .collect::<Vec<_>>()}});
    let start = std::time::Instant::now();
    let (r, meter) = eval_metered(
        "object.spec.containers.all(c, !'x'.matches(c.name))",
        &object,
        |_| {},
    );
    assert_eq!(r.unwrap(), json!(true));
    assert_eq!(meter.regexes_compiled, 200);
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    // What such a pattern takes counts against the memory ceiling, before it is built.
    let object = json!({"re": "[a-z]{1000}".repeat(30)});
    let (r, _) = eval_metered("!'x'.matches(object.re)", &object, |m| {
        m.memory_limit = 1 << 20
    });
    assert_eq!(
        r.unwrap_err().to_string(),
        "operation cancelled: memory limit exceeded"
    );
}

/// A map of two entries nested `depth` deep (`2^depth` leaves).
fn tree(depth: u32) -> serde_json::Value {
    if depth == 0 {
        return json!(1);
    }
    json!({"a": tree(depth - 1), "b": tree(depth - 1)})
}

#[test]
fn a_passed_deadline_stops_every_long_operation() {
    let n = 30_000;
    let object = json!({
        "long": "ab,".repeat(n),
        "list": (0..n).collect::<Vec<_>>(),
        "strings": vec!["ab"; n],
        "small": (0..700).collect::<Vec<_>>(),
        "pattern": "b+",
        "tree": tree(12),
    });
    let past = |m: &mut Meter| m.deadline = Some(std::time::Instant::now());
    // 1,089 optionals, built without a comprehension reaching a deadline check.
    let unwrap = format!(
        "({}).unwrapOpt().size() > 0",
        ["lists.range(99).map(i, optional.of(i))"; 11].join(" + ")
    );
    for expr in [
        unwrap.as_str(),
        "object.strings.join(',').size() > 0",
        "object.long.split(',').size() > 0",
        "object.long.replace(',', ';').size() > 0",
        "!object.long.matches('x$')",
        "object.long.matches(object.pattern)",
        "!'x'.matches(object.pattern)",
        "object.long.find('x$') == ''",
        "object.long.findAll('b').size() > 0",
        "object.long.indexOf('x') < 0",
        "object.list.indexOf(-1) < 0",
        "object.list.lastIndexOf(-1) < 0",
        "object.list.isSorted()",
        "object.list.sum() > 0",
        "sets.contains(object.small, object.small)",
        "sets.equivalent(object.small, object.small)",
        "!sets.intersects(object.small, [-1, -2])",
        "object.small.distinct().size() > 0",
        "[object.list] == [object.list]",
        "[object.list] in [[object.list]]",
        "'%s'.format([object.list]).size() > 0",
        // Maps of two entries, 12 deep: each entry is formatted apart, a few steps each.
        "'%s'.format([object.tree]).size() > 0",
        "[object.list].flatten().size() > 0",
        "object.list.slice(0, 30000).size() > 0",
        "(object.list + object.list).size() > 0 && object.list.includes(-1) == false",
        "object.strings.map(s, optional.of(s)).size() > 0",
    ] {
        let (r, _) = eval_metered(expr, &object, past);
        let e = r.expect_err(expr);
        assert_eq!(e.to_string(), "operation interrupted", "{expr}");
        assert_eq!(
            e.cancel_reason(),
            Some(celgate::cel::CancelReason::Deadline),
            "{expr}"
        );
        // Without a deadline it evaluates (to true).
        let (r, _) = eval_metered(expr, &object, |_| {});
        assert_eq!(r.unwrap(), json!(true), "{expr}");
    }
    // Short work never looks at the clock.
    for expr in [
        "['a', 'b'].join(',') == 'a,b'",
        "'a,b'.split(',').size() == 2",
        "object.small.slice(0, 10).size() == 10",
    ] {
        let (r, _) = eval_metered(expr, &object, past);
        assert_eq!(r.unwrap(), json!(true), "{expr}");
    }
}

#[test]
fn cancellations_say_which_limit_stopped_them() {
    let object = json!({});
    let (r, _) = eval_metered(
        "lists.range(2000).all(i, lists.range(2000).all(j, true))",
        &object,
        |_| {},
    );
    let e = r.unwrap_err();
    assert_eq!(
        e.cancel_reason(),
        Some(celgate::cel::CancelReason::CostLimit)
    );
    assert_eq!(e.cancel_reason().map(|r| r.label()), Some("cost_limit"));
    let (r, _) = eval_metered("lists.range(200).all(i, true)", &object, |m| {
        m.deadline = Some(std::time::Instant::now())
    });
    assert_eq!(
        r.unwrap_err().cancel_reason().map(|r| r.label()),
        Some("deadline")
    );
    let (r, _) = eval_metered("'a'.matches(['['][0])", &object, |_| {});
    assert_eq!(r.unwrap_err().cancel_reason(), None);
    let (r, _) = eval_metered("1 / 0 == 1", &object, |_| {});
    assert_eq!(r.unwrap_err().cancel_reason(), None);
}

/// `findAll`'s limit applies whether the pattern is a constant (compiled once, taken out of
/// the arguments) or known only at run time (found by the fuzz target `eval`).
#[test]
fn find_all_honours_its_limit_with_a_constant_pattern() {
    for expr in [
        "'abab'.findAll('b', 1)",
        "'abab'.findAll(dyn('b'), 1)",
        "'abab'.findAll(object.re, 1)",
    ] {
        assert_eq!(
            eval_with(expr, serde_json::json!({"re": "b"})),
            Ok(serde_json::json!(["b"])),
            "{expr}"
        );
    }
    assert_eq!(
        eval("'abab'.findAll('b', -1)"),
        Ok(serde_json::json!(["b", "b"]))
    );
    assert_eq!(eval("'abab'.findAll('b', 0)"), Ok(serde_json::json!([])));
}

/// Found by the evaluation fuzzer: a request whose object has 100,000 labels, and a policy
/// that looks every key up again (`labels.all(k, labels[k] != 'x')`). Each lookup is
/// charged as a hash lookup (one unit, as cel-go's map), so the cost limit does not stop it;
/// a lookup that scanned the keys made it quadratic (6.6 s of CPU for one expression).
/// Large document objects are indexed when parsed: the whole walk stays far inside a
/// deadline that the quadratic walk overran.
#[test]
fn lookups_in_a_huge_object_of_the_request_are_hash_lookups() {
    use celgate::cel::json::Doc;
    let labels: Vec<String> = (0..100_000)
        .map(|i| format!("\"team.example.com/label-{i}\": \"v{i}\""))
        .collect();
    let text = format!(r#"{{"metadata": {{"labels": {{{}}}}}}}"#, labels.join(","));
    let doc = Doc::parse(text.as_bytes()).unwrap();
    let r = eval_object(
        "object.metadata.labels.all(k, object.metadata.labels[k] != 'x')",
        Value::from_doc(doc.root()),
        // A generous deadline (the indexed walk takes tens of milliseconds in a debug build).
        |m| m.deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(4)),
    );
    assert_eq!(r, Ok(json!(true)));
}

/// `sum`, `min` and `max` have one overload per element type, as Kubernetes declares them
/// (found by the evaluation fuzzer: an empty list of doubles summed to the int 0, and a list
/// of lists compiled).
#[test]
fn list_aggregates_follow_kubernetes_overloads() {
    assert_eq!(eval("[1.5].filter(x, false).sum()"), Ok(json!(0.0)));
    assert_eq!(eval("[1u].filter(x, false).sum()"), Ok(json!(0)));
    assert_eq!(
        eval("[duration('1s')].filter(x, false).sum() == duration('0s')"),
        Ok(json!(true))
    );
    assert_eq!(
        eval("type([1.5].filter(x, false).sum()) == double"),
        Ok(json!(true))
    );
    // A dyn list takes the overload of its first element, as cel-go's runtime type guard.
    assert_eq!(eval("dyn([1.5, 2.5]).sum()"), Ok(json!(4.0)));
    assert_eq!(
        eval("[dyn(1), dyn(2.5)].sum()"),
        Err("no such overload".to_string())
    );
    for (expr, func) in [
        ("[[1], [2]].sum()", "sum"),
        ("[[1], [2]].min()", "min"),
        ("[{}].max()", "max"),
        ("['a'].sum()", "sum"),
    ] {
        let e = eval(expr).unwrap_err();
        assert!(
            e.starts_with("compile: found no matching overload for '") && e.contains(func),
            "{expr}: {e}"
        );
    }
    assert_eq!(eval("['b', 'a'].min()"), Ok(json!("a")));
}

#[test]
fn contains_cidr_masks_the_other_prefix_from_1_33() {
    // Kubernetes 1.32 compared the receiver's masked prefix with the other's address as
    // written (recorded: `cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')` is false);
    // kubernetes/kubernetes#130450 masks it from 1.33.
    let run = |minor: u16, expr: &str| {
        let env = Env::new(minor);
        let program = env.compile(expr).unwrap();
        let mut meter = Meter::with_limit(PER_CALL_LIMIT);
        program
            .eval(&Vec::<Value>::new(), &mut meter)
            .unwrap()
            .to_json()
    };
    for (expr, old, new) in [
        (
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
            false,
            true,
        ),
        (
            "cidr('10.0.0.0/8').containsCIDR(cidr('10.128.0.0/9'))",
            false,
            true,
        ),
        ("cidr('10.0.0.0/8').containsCIDR('10.0.0.0/16')", true, true),
        (
            "cidr('10.0.0.0/16').containsCIDR('10.0.0.0/8')",
            false,
            false,
        ),
    ] {
        assert_eq!(run(32, expr), json!(old), "1.32: {expr}");
        assert_eq!(run(33, expr), json!(new), "1.33: {expr}");
    }
}

#[test]
fn cel_go_v0_23_additions_arrive_with_1_33() {
    // Recorded from Kubernetes 1.32 (cel-go v0.22): `undeclared reference to 'first'`...
    for expr in [
        "[1].first()",
        "[1].last()",
        "[optional.of(1)].unwrapOpt()",
        "optional.unwrap([optional.of(1)])",
        "[1, 2].existsOne(x, x > 1)",
    ] {
        let err = Env::new(32).compile(expr).unwrap_err().to_string();
        assert!(err.contains("undeclared reference"), "1.32: {expr}: {err}");
        assert!(Env::new(33).compile(expr).is_ok(), "1.33: {expr}");
    }
    // The two-variable `existsOne` is 1.32's.
    assert!(Env::new(32)
        .compile("[1, 2].existsOne(i, v, v > 1)")
        .is_ok());
}

#[test]
fn map_literals_are_built_as_cel_go_builds_them() {
    // Recorded from Kubernetes 1.32 (cel differential std.collections, std.equality); the
    // same in cel-go up to v0.26. Folded at compile time and built at run time alike.
    let name = json!({"metadata": {"name": "n"}});
    for expr in [
        "{'a': 1, 'a': 2} == {'a': 2}",
        "{'a': [1][0], 'a': [2][0]} == {'a': 2}",
        "{object.metadata.name: 1, object.metadata.name: 2}[object.metadata.name] == 2",
        "size({dyn(1): 'a', dyn(1u): 'b', dyn(1.0): 'c'}) == 3",
        "{1.5: 'x'}[1.5] == 'x' && {[1.5][0]: 'x'}[1.5] == 'x'",
        "null in {null: 1} && null in {[null][0]: 1}",
        "size({[1]: 1, [1]: 2}) == 2",
        "{1.0: 1} == dyn({1: 1}) && dyn({1: 1}) != {1.0: 1}",
        "dyn({1: 'a'})[1.0] == 'a' && !(1 in dyn({1.0: 'a'}))",
        "{'a': 1, ?'a': optional.none()} == {}",
        "{'a': 1, ?'a': [optional.none()][0]} == {}",
    ] {
        assert_eq!(eval_with(expr, name.clone()), Ok(json!(true)), "{expr}");
    }
    // A bytes key cannot be hashed by Go (cel-go panics): an error, not a panic.
    assert!(eval("{[b'x'][0]: 1}").is_err());
    assert!(eval("{b'x': 1}").is_err());
}

#[test]
fn library_values_refuse_equality_with_other_types() {
    // Recorded from Kubernetes 1.32 (k8s.quantity, k8s.ip, k8s.authz): the library type's
    // `Equal` answers `no such overload` for another type, cel-go's own types answer false.
    for expr in [
        "dyn(quantity('1')) == 1",
        "quantity('1') == dyn('1')",
        "quantity('1') != dyn('1')",
        "ip('1.2.3.4') == dyn('1.2.3.4')",
        "cidr('10.0.0.0/8') == dyn(ip('10.0.0.0'))",
        "url('https://a') == dyn('https://a')",
        "semver('1.0.0') == dyn(1)",
        "format.dns1123Label() == dyn('x')",
    ] {
        assert_eq!(eval(expr), Err("no such overload".to_string()), "{expr}");
    }
    for (expr, want) in [
        ("1 == dyn(quantity('1'))", false),
        ("dyn('1.2.3.4') != ip('1.2.3.4')", true),
        ("quantity('1') == dyn(null)", false),
        ("quantity('1') == quantity('1000m')", true),
        ("ip('::1') == ip('0:0:0:0:0:0:0:1')", true),
        (
            "format.named('dns1123Label').value() == format.dns1123Label()",
            true,
        ),
    ] {
        assert_eq!(eval(expr), Ok(json!(want)), "{expr}");
    }
    // The authorizer types refuse even themselves.
    assert_eq!(
        eval_authz("authorizer.path('/x') == authorizer.path('/x')"),
        Err("no such overload".to_string())
    );
    assert_eq!(eval_authz("authorizer == dyn(null)"), Ok(json!(false)));
}

#[test]
fn lists_library_ignores_comparisons_cel_go_refuses() {
    // Recorded from Kubernetes 1.32 (k8s.lists): `isSorted`, `min` and `max` skip a pair whose
    // `Compare` is an error (kinds that do not order), and compare numbers across kinds.
    for (expr, want) in [
        ("[dyn(1), dyn(2.5)].isSorted()", json!(true)),
        ("[dyn(1), dyn(2.5)].min()", json!(1)),
        ("[dyn(1), dyn(2.5)].max()", json!(2.5)),
        ("[dyn(1), dyn('a')].isSorted()", json!(true)),
        ("[dyn('b'), dyn(1), dyn('a')].isSorted()", json!(true)),
        ("[dyn(1), dyn('a')].min()", json!(1)),
        ("[dyn(1), dyn('a')].max()", json!(1)),
        ("[dyn('a'), dyn(1)].max()", json!("a")),
        ("[dyn(2), dyn(1u)].isSorted()", json!(false)),
        ("[dyn(2), dyn(1u)].min()", json!(1)),
        ("[dyn(1.5), dyn(1)].max()", json!(1.5)),
        ("[3, 1, 2].min()", json!(1)),
        ("[3, 1, 2].max()", json!(3)),
        ("[1, 2, 2].isSorted()", json!(true)),
    ] {
        assert_eq!(eval(expr), Ok(want), "{expr}");
    }
    // An element that does not order at all is refused.
    assert_eq!(
        eval("[dyn(1), dyn([1])].min()"),
        Err("no such overload".to_string())
    );
    // A list of lists or maps is not sorted: Kubernetes declares one overload per
    // comparable type, so it is a compile error.
    assert!(eval("[[1], [2]].isSorted()")
        .unwrap_err()
        .starts_with("compile:"));
    assert!(eval("[{'a': 1}].isSorted()")
        .unwrap_err()
        .starts_with("compile:"));
}

/// Evaluates `expr` (no variables bound) in the VAP environment of Kubernetes 1.`minor`.
fn eval_at(minor: u16, expr: &str) -> Result<serde_json::Value, String> {
    eval_in(minor, expr, Value::Null, |_| {})
}

#[test]
fn a_failed_two_variable_comprehension_range_follows_the_cel_go_version() {
    // cel-go v0.22 (Kubernetes 1.32, recorded): the two-variable fold reports the range's
    // Go type; v0.23 (1.33) returns the range's own error first.
    let expr = "{'k': 'a', 'l': 'abc'.charAt(-1)}.transformMap(k, v, v + '1')";
    assert_eq!(
        eval_at(32, expr),
        Err("unsupported comprehension range type: *types.Err".to_string())
    );
    assert_eq!(eval_at(33, expr), Err("index out of range: -1".to_string()));
    assert_eq!(
        eval_at(32, "{'a': [1][2]}.all(k, v, v > 0)"),
        Err("unsupported comprehension range type: *types.Err".to_string())
    );
    // One-variable comprehensions return the range's error in every version.
    assert_eq!(
        eval_at(32, "{'a': [1][2]}.all(k, k != '')"),
        Err("index out of bounds: 2".to_string())
    );
    // A range that is no list or map, in a two-variable comprehension.
    assert_eq!(
        eval_at(33, "dyn('ab').all(i, v, true)"),
        Err("unsupported comprehension range type: types.String".to_string())
    );
    assert_eq!(
        eval_at(33, "dyn('ab').all(v, true)"),
        Err("got 'types.String', expected iterable type".to_string())
    );
}

#[test]
fn membership_in_a_constant_empty_list_is_false_without_evaluating_the_element() {
    // cel-go's OptOptimize folds it: the failing element is never evaluated or charged.
    assert_eq!(
        eval_with("object.missing in []", json!({})),
        Ok(json!(false))
    );
    assert_eq!(cost("object.missing in []", json!({})), 0);
    // Only an empty constant list: a non-empty one still evaluates the element.
    assert_eq!(
        eval_with("object.missing in [1]", json!({})),
        Err("no such key: missing".to_string())
    );
    // Only a call checked as the list overload: `dyn([])` matches the map one too, and
    // cel-go optimises by overload id.
    assert_eq!(
        eval_with("object.missing in dyn([])", json!({})),
        Err("no such key: missing".to_string())
    );
    // Without the optimiser the element is evaluated, as cel-go without OptOptimize.
    let (mut env, slots) = vap_env(
        NEWEST_MINOR,
        Decls {
            params: false,
            authorizer: false,
        },
    );
    env.optimize = false;
    let program = env.compile("object.missing in []").unwrap();
    let object = json!({});
    let mut vars = vec![Value::Null; env.variables().len()];
    vars[slots.object] = Value::from_json(&object);
    let mut meter = Meter::with_limit(PER_CALL_LIMIT);
    assert_eq!(
        program
            .eval(&vars, &mut meter)
            .map(|v| v.to_json())
            .map_err(|e| e.to_string()),
        Err("no such key: missing".to_string())
    );
}

#[test]
fn concatenation_is_priced_by_its_checked_overload_even_when_an_operand_failed() {
    let object = json!({"name": "web-frontend", "other": "abc"});
    // cel-go prices `string + string` by the overload id the checker chose: the failed
    // substring counts 1, so ⌈0.1 · (1 + 12)⌉ = 2 on top of 1 (substring) and 2 (the select).
    assert_eq!(
        cost_and_result("'9090'.substring(0, -1) + object.name", object.clone()),
        (
            5,
            Err("invalid substring range. start: 0, end: -1".to_string())
        )
    );
    // Two `dyn` operands leave several overloads: no id, cel-go's default of 1.
    assert_eq!(
        cost_and_result("object.name + object.other", object),
        (5, Ok(json!("web-frontendabc")))
    );
}

#[test]
fn an_attribute_used_as_an_optional_index_is_charged_only_when_it_finds_something() {
    let object = json!({"labels": {"a": "x"}, "key": "a", "missing": "b", "i": 0, "j": 5});
    // object(1) .labels(1), then the index `object.key` (2): found, all charged.
    assert_eq!(
        cost_and_result("object.labels[?object.key].orValue('none')", object.clone()),
        (4, Ok(json!("x")))
    );
    // Not found: cel-go does not observe the index attribute itself (its head), only the
    // selection it read.
    assert_eq!(
        cost_and_result(
            "object.labels[?object.missing].orValue('none')",
            object.clone()
        ),
        (3, Ok(json!("none")))
    );
    // A computed operand's relative attribute is charged whether or not the index found
    // anything: [1, 2] is a constant (0), its relative attribute 1, `object.j` 2 less its head.
    assert_eq!(cost_and_result("[1, 2][?object.j]", object).0, 2);
}

#[test]
fn opt_map_evaluates_its_target_value_only_when_the_body_reads_the_variable() {
    // `t.hasValue()` (2) and `optional.none()` (1): the body never reads x, so the fold's
    // accumulator `optional.of(1).value()` is not evaluated (cel-go's lazy accumulator).
    assert_eq!(
        cost_and_result(
            "optional.of(1).optFlatMap(x, optional.none()).hasValue()",
            json!({})
        ),
        (4, Ok(json!(false)))
    );
    // Read once: hasValue (2), value with the target again (2), x (1), x * 2 (1), the
    // `optional.of` around the fold (1) and the final value() (1).
    assert_eq!(
        cost_and_result("optional.of(1).optMap(x, x * 2).value()", json!({})),
        (8, Ok(json!(2)))
    );
    // A failing body still charges the `optional.of` around it.
    assert_eq!(
        cost_and_result("optional.of(0).optMap(x, 1 / x)", json!({})),
        (7, Err("division by zero".to_string()))
    );
}

#[test]
fn an_optional_of_an_optional_read_through_an_attribute_is_one_optional() {
    // cel-go's attributes unwrap an optional base to its Go value and wrap it once again.
    assert_eq!(
        eval_with(
            "dyn(optional.of(1).optMap(x, optional.of(x)).value()) == 1",
            json!({})
        ),
        Ok(json!(true))
    );
    assert_eq!(
        eval_with(
            "dyn([optional.of(optional.of(2))].map(x, x.value())[0]) == 2",
            json!({})
        ),
        Ok(json!(true))
    );
    // A none inside becomes null.
    assert_eq!(
        eval_with(
            "dyn((true ? optional.of(optional.none()) : optional.none()).value()) == null",
            json!({})
        ),
        Ok(json!(true))
    );
    // A selection is no attribute read of an optional base: nothing is unwrapped there.
    assert_eq!(
        eval_with(
            "optional.of(optional.of(3)).value().value() == 3",
            json!({})
        ),
        Ok(json!(true))
    );
}

#[test]
fn transform_map_folds_on_after_an_error_as_cel_go_does() {
    // After a failed step, cel-go's `cel.@mapInsert(@result, k, t)` stops at the failed
    // `@result`: each later step costs 1, and the first error is the result.
    let (two, r2) = cost_and_result("['x', 'y'].transformMap(i, v, [v][i])", json!({}));
    let (three, r3) = cost_and_result("['x', 'y', 'z'].transformMap(i, v, [v][i])", json!({}));
    assert_eq!(r2, Err("index out of bounds: 1".to_string()));
    assert_eq!(r3, r2);
    assert_eq!(three, two + 1);
    // The entry form is binary: later steps are evaluated and charged in full, and a
    // duplicate key is an error charged like any step (recorded from Kubernetes 1.32).
    assert_eq!(
        cost_and_result("['a', 'a'].transformMapEntry(i, v, {v: i})", json!({})),
        (69, Err("insert failed: key a already exists".to_string()))
    );
}

#[test]
fn an_optional_index_that_fails_does_not_charge_its_qualifier() {
    // cel-go observes `[k]` with the error, but not `[?k]` (`QualifyIfPresent`); the relative
    // attribute around the computed operand is charged in both.
    let (plain, r1) = cost_and_result("[1, 2].map(x, x)[[].max()]", json!({}));
    let (optional, r2) = cost_and_result("[1, 2].map(x, x)[?[].max()]", json!({}));
    assert_eq!(r1, Err("max called on empty list".to_string()));
    assert_eq!(r2, r1);
    assert_eq!(plain, optional + 1);
}

#[test]
fn contains_ip_charges_parsing_a_string_only_when_the_string_overload_was_checked() {
    let object = json!({"c": "10.0.0.0/8", "ip": "10.1.2.3"});
    // `dyn` argument: both overloads match, no overload id, Kubernetes' cost.go does not
    // add the parse: object.c (2), cidr (1), object.ip (2), the comparison (1).
    assert_eq!(
        cost_and_result("cidr(object.c).containsIP(object.ip)", object.clone()),
        (6, Ok(json!(true)))
    );
    // A string argument: the string overload, which adds ⌈0.1 · 8⌉ for parsing it (and
    // string() costs 1).
    assert_eq!(
        cost_and_result("cidr(object.c).containsIP(string(object.ip))", object),
        (8, Ok(json!(true)))
    );
}

#[test]
fn join_with_a_failed_separator_is_priced_for_an_error_result() {
    // Kubernetes prices join by the size of its result: an error counts 1, ⌈0.2⌉ = 1,
    // whatever the list holds. object.s (2), substring (⌈0.1 · 3⌉ = 1), join (1).
    assert_eq!(
        cost_and_result(
            "['a-long-element', 'another'].join(object.s.substring(-1))",
            json!({"s": "abc"})
        ),
        (4, Err("index out of range: -1".to_string()))
    );
}

#[test]
fn a_conversion_resolved_to_one_overload_guards_its_argument_at_run_time() {
    // The optional's value and `{}`'s are free types: `int` binds its first overload,
    // `int(int)`, whose guard refuses the string that turns up (cel-go's type guards).
    let object = json!({"a": {"b": "x"}});
    assert_eq!(
        eval_with("int(object.?a[?'b'].orValue({}['c']))", object.clone()),
        Err("no such overload: int(string)".to_string())
    );
    // Checked as `int(string)` (or `dyn`, many overloads), a string converts as usual.
    assert_eq!(
        eval_with("int(object.a.b)", object.clone()),
        Err("type conversion error from 'string' to 'int'".to_string())
    );
    assert_eq!(eval_with("int('12')", object), Ok(json!(12)));
}

/// Reviewer item 3b: a regex search on the VM checks its thread lists (56 bytes an
/// instruction) against the room under the memory ceiling before allocating them: a constant
/// of 60,000 instructions (3.4 MB of lists) fails under a 1 MiB ceiling with the memory
/// error, and evaluates under the default one.
#[test]
fn a_regex_search_is_checked_against_the_memory_ceiling() {
    let object = json!({"s": "a"});
    let expr = format!("!object.s.matches('^{}$')", r"\\pL{1000}".repeat(60));
    let (r, _) = eval_metered(&expr, &object, |m| m.memory_limit = 1 << 20);
    assert_eq!(
        r.expect_err("under 1 MiB").to_string(),
        "operation cancelled: memory limit exceeded"
    );
    let (r, _) = eval_metered(&expr, &object, |_| {});
    assert_eq!(r.unwrap(), json!(true));
}
