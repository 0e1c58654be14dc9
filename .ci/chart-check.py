#!/usr/bin/env python3
"""Renders and lints charts/celgate with its default values and with each certificate mode,
validates every rendered object against the Kubernetes schemas (the chart's kubeVersion floor,
and the newest), checks that Chart.yaml's kubeVersion and README's modes table name that
floor, checks the properties the chart promises (among them: no render without
image.repository, the webhook fail-open until celgate is seen ready, namespace-scoped param
Roles with the matching --param-namespaces, the optional MutatingWebhookConfiguration rendered
and validated under every supported minor), and checks that deploy/celgate.yaml and charts/celgate/README.md are current.

    python3 .ci/chart-check.py            # check (CI)
    python3 .ci/chart-check.py --write    # regenerate deploy/celgate.yaml and the chart README

Needs helm-python-sdk (Helm's Go SDK, no helm binary) and kubernetes-validate from PyPI.
"""

import copy
import json
import pathlib
import re
import shutil
import sys
import tempfile

import helm_python as helm
import kubernetes_validate
import yaml

import chart_readme

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "celgate"
DEPLOY = ROOT / "deploy" / "celgate.yaml"
RELEASE, NAMESPACE = "celgate", "celgate-system"
# The chart's kubeVersion floor, and the newest schemas available. The same for both policy
# sources: the cluster's own policies need the v1 ValidatingAdmissionPolicy API (GA in 1.30),
# and every rendering the preStop `sleep` action (beta in 1.30; the 1.28 schema refuses it).
FLOOR, NEWEST = "1.30.0", "1.37.0"
# Every supported minor, FLOOR to NEWEST: the variants with the MutatingWebhookConfiguration are
# rendered (Capabilities) and validated under each, as MAPs are what differs between them.
MINORS = [f"1.{m}.0" for m in range(int(FLOOR.split(".")[1]), int(NEWEST.split(".")[1]) + 1)]
# Kinds from CRDs, which kubernetes-validate has no schema for: checked by the required
# fields of their CRDs here instead.
CRD_REQUIRED = {
    ("cert-manager.io/v1", "Issuer"): [],
    ("cert-manager.io/v1", "Certificate"): ["secretName", "issuerRef"],
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ["selector"],
}

# Every rendering names an image: the chart has no default (celgate publishes none).
IMAGE = {"image": {"repository": "registry.example.com/celgate"}}

VARIANTS = {
    "default": {},
    "generated": {"certificates": {"mode": "generated"}},
    "cert-manager": {"certificates": {"mode": "certManager"}},
    "cert-manager-issuer": {
        "certificates": {
            "mode": "certManager",
            "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
        }
    },
    "existing-secret": {
        "certificates": {
            "mode": "existingSecret",
            "existingSecret": {"name": "my-tls", "caBundle": "LS0tLS1CRUdJTi0tLS0tCg=="},
        }
    },
    "everything-on": {
        "autoscaling": {"enabled": True},
        "dashboard": {"enabled": True},
        "serviceMonitor": {"enabled": True},
        "networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]},
        "celgate": {"events": False, "k8sVersion": "1.33"},
        "rbac": {"paramResources": [{"apiGroups": ["policy.example.com"], "resources": ["limits"]}]},
        "webhook": {"failOpenUntilReady": False},
    },
    "observe": {"mode": "observe"},
    # celgate keeps the webhook's rules (and selector hints) itself: the other default.
    "dynamic-rules": {"webhook": {"rulesMode": "dynamic"}},
    "policies-from-configmap": {"policies": {"fromConfigMap": "canary-policies"}},
    "policies-from-secret-tls-files": {"policies": {"fromSecret": "canary-policies"},
                                       "certificates": {"mode": "generated"}},
    "background-off-no-events": {"background": {"enabled": False}, "celgate": {"events": False}},
    "background-narrowed": {
        "background": {"interval": "30m", "qps": 5, "concurrency": 1, "pageSize": 100, "debounce": "10s",
                       "rbacRules": [{"apiGroups": ["", "apps"], "resources": ["pods", "deployments"]}]},
        "celgate": {"events": False},
    },
    "reports": {"reports": {"enabled": True}},
    "reports-wgpolicy-crds": {"reports": {"enabled": True, "installCRDs": True}},
    "reports-openreports-crds-no-events": {
        "reports": {"enabled": True, "format": "openreports", "installCRDs": True, "interval": "30s", "maxResults": 500},
        "celgate": {"events": False},
    },
    # The MutatingWebhookConfiguration (/mutate) beside the validating one, per certificate
    # mode and rules mode, and with its values changed.
    "mutating": {"mutating": {"enabled": True}},
    "mutating-dynamic-rules": {"mutating": {"enabled": True}, "webhook": {"rulesMode": "dynamic"}},
    "mutating-generated": {"mutating": {"enabled": True}, "certificates": {"mode": "generated"}},
    "mutating-cert-manager": {"mutating": {"enabled": True}, "certificates": {"mode": "certManager"}},
    "mutating-observe-folder": {"mutating": {"enabled": True}, "mode": "observe",
                                "policies": {"fromConfigMap": "canary-policies"}},
    "mutating-tuned": {
        "mutating": {
            "enabled": True, "failurePolicy": "Ignore", "timeoutSeconds": 3, "reinvocationPolicy": "Never",
            "excludedNamespaces": ["team-x"],
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
        },
        "webhook": {"failOpenUntilReady": False},
    },
    "namespaced-params": {
        "rbac": {
            "paramResources": [
                {"apiGroups": [""], "resources": ["configmaps"], "namespaces": ["team-a", "team-b"]},
                {"apiGroups": ["policy.example.com"], "resources": ["limits"]},
                {"apiGroups": ["policy.example.com"], "resources": ["quotas"], "namespaces": ["team-b", "team-a"]},
            ]
        }
    },
}

# Values the schema or the templates must refuse, with a text the error must hold.
SCHEMA = "don't meet the specifications of the schema"
INVALID = {
    "failurePolicy": ({"webhook": {"failurePolicy": "Sometimes"}}, SCHEMA),
    "failOpenUntilReady": ({"webhook": {"failOpenUntilReady": "yes"}}, SCHEMA),
    "timeout": ({"webhook": {"timeoutSeconds": 60}}, SCHEMA),
    "unknown key": ({"webhok": {}}, SCHEMA),
    "certificate mode": ({"certificates": {"mode": "selfmade"}}, SCHEMA),
    "mode": ({"mode": "audit"}, SCHEMA),
    "rules mode": ({"webhook": {"rulesMode": "auto"}}, SCHEMA),
    # The API server's MAP plugin never sees DELETE: a mutating rule may not ask for it.
    "mutating DELETE": ({"mutating": {"enabled": True, "rules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "DELETE"], "resources": ["pods"]}]}}, SCHEMA),
    "mutating every operation": ({"mutating": {"enabled": True, "rules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"]}]}}, SCHEMA),
    "mutating reinvocationPolicy": ({"mutating": {"reinvocationPolicy": "Always"}}, SCHEMA),
    "mutating timeout": ({"mutating": {"timeoutSeconds": 31}}, SCHEMA),
    "mutating unknown key": ({"mutating": {"enable": True}}, SCHEMA),
    "dynamic rules without the controller": ({"webhook": {"rulesMode": "dynamic"}, "certificates": {"mode": "generated"}},
                                              "webhook.rulesMode dynamic needs certificates.mode controller"),
    "policies from both": ({"policies": {"fromConfigMap": "a", "fromSecret": "b"}}, "set fromConfigMap or fromSecret, not both"),
    "policies unknown key": ({"policies": {"fromConfigmap": "a"}}, SCHEMA),
    "reports format": ({"reports": {"enabled": True, "format": "kyverno"}}, SCHEMA),
    "reports maxResults": ({"reports": {"enabled": True, "maxResults": 0}}, SCHEMA),
    "reports interval": ({"reports": {"enabled": True, "interval": "often"}}, SCHEMA),
    "background qps": ({"background": {"qps": 0}}, SCHEMA),
    "background concurrency": ({"background": {"concurrency": 0}}, SCHEMA),
    "background interval": ({"background": {"interval": "hourly"}}, SCHEMA),
    "background rule without resources": ({"background": {"rbacRules": [{"apiGroups": ["*"], "resources": []}]}}, SCHEMA),
    "controller duration": ({"certificates": {"controller": {"overlap": "soon"}}}, SCHEMA),
    "param namespace name": ({"rbac": {"paramResources": [{"apiGroups": [""], "resources": ["configmaps"], "namespaces": ["Team_A"]}]}}, SCHEMA),
    "param entry without resources": ({"rbac": {"paramResources": [{"apiGroups": [""], "resources": []}]}}, SCHEMA),
    # An empty list would read as "cluster-wide": refused, say which.
    "param entry with no namespaces": ({"rbac": {"paramResources": [{"apiGroups": [""], "resources": ["configmaps"], "namespaces": []}]}}, SCHEMA),
    # celgate watches every namespaced param kind in one set of namespaces (--param-namespaces).
    "param entries in different namespaces": ({"rbac": {"paramResources": [
        {"apiGroups": [""], "resources": ["configmaps"], "namespaces": ["team-a", "team-b"]},
        {"apiGroups": ["policy.example.com"], "resources": ["quotas"], "namespaces": ["team-a"]},
    ]}}, "list different ones (team-a,team-b / team-a)"),
}
# A render without image.repository is refused with the commands that make an image.
NO_IMAGE_HINT = ["image.repository is required", "docker build -t REGISTRY/celgate:0.1.0 .",
                 "docker push REGISTRY/celgate:0.1.0", "--set image.repository=REGISTRY/celgate"]

failures = []
passed = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}")


def ok(message):
    passed.append(message)
    print(f"ok   {message}")


def with_image(values):
    merged = copy.deepcopy(values)
    merged.setdefault("image", {}).setdefault("repository", IMAGE["image"]["repository"])
    return merged


def render(values, chart_dir=CHART, kube_version=None):
    """The rendered objects as one YAML text, the objects, and the NOTES; `kube_version`:
    the cluster's (.Capabilities.KubeVersion), else Helm's default."""
    chart = helm.Chart.load(str(chart_dir))
    if kube_version is None:
        manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    else:
        # Chart.render has no kube_version parameter; the SDK's C call it wraps takes one.
        from helm_python import _native
        opts = {"name": RELEASE, "namespace": NAMESPACE, "is_install": True, "kube_version": kube_version}
        manifests = json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(opts)))
    text = "".join(
        f"---\n# Source: {path}\n{body.strip()}\n"
        for path, body in sorted(manifests.items())
        if body.strip() and not path.endswith("NOTES.txt")
    )
    objects = [o for o in yaml.safe_load_all(text) if o]
    notes = "".join(body for path, body in manifests.items() if path.endswith("NOTES.txt"))
    return text, objects, notes


def validate(variant, obj, versions=(FLOOR, NEWEST)):
    kind = (obj.get("apiVersion"), obj.get("kind"))
    name = f"{variant}: {kind[1]} {obj.get('metadata', {}).get('name')}"
    if kind in CRD_REQUIRED:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or not obj.get("metadata", {}).get("name"):
            fail(f"{name}: no spec or name")
        for field in CRD_REQUIRED[kind]:
            if field not in spec:
                fail(f"{name}: spec.{field} missing")
        return
    for version in versions:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            fail(f"{name} (Kubernetes {version}): {e.message} at {'.'.join(map(str, e.path))}")
        except Exception as e:  # schema not found and the like
            fail(f"{name} (Kubernetes {version}): {e}")


def find(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found[0] if found else None


def check_promises(variant, objects):
    """What the chart promises, checked on each rendering."""
    hook = find(objects, "ValidatingWebhookConfiguration")
    dep = find(objects, "Deployment")
    if hook is None or dep is None:
        fail(f"{variant}: no webhook configuration or deployment")
        return
    w = hook["webhooks"][0]
    excluded = w["namespaceSelector"]["matchExpressions"][0]
    if excluded["operator"] != "NotIn" or not {"kube-system", NAMESPACE} <= set(excluded["values"]):
        fail(f"{variant}: kube-system and the release namespace must be excluded: {excluded}")
    # No cluster to look celgate's Deployment up in: fail-open, unless told otherwise.
    fail_open = variant_values(variant).get("webhook", {}).get("failOpenUntilReady", True)
    # Observe mode never blocks a write: Ignore always, and a short timeout.
    observe = variant_values(variant).get("mode") == "observe"
    if w["failurePolicy"] != ("Ignore" if fail_open or observe else "Fail"):
        fail(f"{variant}: failurePolicy {w['failurePolicy']} before celgate is seen ready")
    if w["matchPolicy"] != "Equivalent" or w["timeoutSeconds"] != (2 if observe else 5):
        fail(f"{variant}: webhook defaults changed: {w}")
    conditions = {c["name"] for c in w.get("matchConditions", [])}
    if not {"not-an-auth-review", "not-a-lease", "not-a-node-heartbeat"} <= conditions:
        fail(f"{variant}: auth reviews, leases and node heartbeats must never reach celgate: {conditions}")
    mode = variant_values(variant).get("certificates", {}).get("mode", "controller")
    ca = w["clientConfig"].get("caBundle")
    check_certificate_controller(variant, objects, mode == "controller", dep, ca)
    if mode == "controller":
        pass
    elif mode == "certManager":
        if "cert-manager.io/inject-ca-from" not in hook["metadata"].get("annotations", {}):
            fail(f"{variant}: cert-manager must inject the CA")
    elif not ca:
        fail(f"{variant}: no caBundle")
    if mode == "generated":
        secret = find(objects, "Secret")
        if secret is None or secret["data"]["ca.crt"] != ca:
            fail(f"{variant}: the generated Secret's CA must be the webhook's caBundle")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c["securityContext"]
    if not (sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and pod["securityContext"]["runAsNonRoot"]):
        fail(f"{variant}: container must be non-root with a read-only root filesystem")
    if pod["securityContext"]["seccompProfile"]["type"] != "RuntimeDefault":
        fail(f"{variant}: seccomp RuntimeDefault expected")
    for probe in ["readinessProbe", "livenessProbe"]:
        if probe not in c:
            fail(f"{variant}: {probe} missing")
    if "preStop" not in c.get("lifecycle", {}):
        fail(f"{variant}: preStop missing")
    # Who keeps the rules: the chart's rendering (static, the default) or celgate (dynamic),
    # which needs the certificate controller's client (checked refused without it).
    dynamic = variant_values(variant).get("webhook", {}).get("rulesMode", "static") == "dynamic"
    if ("--webhook-rules=dynamic" in c["args"]) != dynamic:
        fail(f"{variant}: --webhook-rules=dynamic must follow webhook.rulesMode: {c['args']}")
    if dynamic and mode != "controller":
        fail(f"{variant}: webhook.rulesMode dynamic rendered without the certificate controller")
    if not w.get("rules"):
        fail(f"{variant}: the webhook must render rules (dynamic mode too: until celgate's first write)")
    if "--source=kubernetes" not in c["args"]:
        fail(f"{variant}: celgate must read the cluster's policies")
    if f"--mode={'observe' if observe else 'enforce'}" not in c["args"]:
        fail(f"{variant}: --mode must follow the mode value: {c['args']}")
    autoscaled = variant == "everything-on"
    if not autoscaled and dep["spec"]["replicas"] != 2:
        fail(f"{variant}: 2 replicas expected")
    if "podAntiAffinity" not in pod.get("affinity", {}):
        fail(f"{variant}: anti-affinity expected")
    if find(objects, "PodDisruptionBudget") is None:
        fail(f"{variant}: PodDisruptionBudget expected")
    if c["image"] != f"{IMAGE['image']['repository']}:0.1.0":
        fail(f"{variant}: image {c['image']}")
    role = find(objects, "ClusterRole", RELEASE)
    verbs = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    if any(v - {"get", "list", "watch"} for k, v in verbs.items() if k[0] != ("authorization.k8s.io",)):
        fail(f"{variant}: the ClusterRole may only read, besides SubjectAccessReviews: {verbs}")
    # The cluster's CRDs: served versions and conversion strategy for equivalent matching.
    if verbs.get((("apiextensions.k8s.io",), ("customresourcedefinitions",))) != {"get", "list", "watch"}:
        fail(f"{variant}: the ClusterRole must get, list and watch customresourcedefinitions: {verbs}")
    check_params(variant, objects, verbs, c["args"])
    check_reports(variant, objects, c["args"])
    check_background(variant, objects, c["args"])
    check_policies(variant, objects, pod, c)
    for kind in ["HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"]:
        if (find(objects, kind) is not None) != autoscaled:
            fail(f"{variant}: {kind} is optional and off by default")
    check_dashboard(variant, objects, autoscaled)
    check_mutating(variant, objects, hook, c["args"])


def check_policies(variant, objects, pod, container):
    """policies.fromConfigMap / fromSecret: that volume, mounted read-only at
    /etc/celgate/policies, and --policies naming it, and no RBAC on the cluster's policies
    and bindings; without them none of the three, and that RBAC."""
    p = variant_values(variant).get("policies", {})
    volumes = [v for v in pod.get("volumes", []) if v["name"] == "policies"]
    mounts = [m for m in container.get("volumeMounts", []) if m["name"] == "policies"]
    flags = [a for a in container["args"] if a.startswith("--policies")]
    if p.get("fromConfigMap"):
        expected_volume = [{"name": "policies", "configMap": {"name": p["fromConfigMap"]}}]
    elif p.get("fromSecret"):
        expected_volume = [{"name": "policies", "secret": {"secretName": p["fromSecret"]}}]
    else:
        expected_volume = []
    on = bool(expected_volume)
    if volumes != expected_volume:
        fail(f"{variant}: policies volume {volumes}, expected {expected_volume}")
    expected_mount = [{"name": "policies", "mountPath": "/etc/celgate/policies", "readOnly": True}] if on else []
    if mounts != expected_mount:
        fail(f"{variant}: policies mount {mounts}, expected {expected_mount}")
    if flags != (["--policies=/etc/celgate/policies"] if on else []):
        fail(f"{variant}: policies flag {flags}")
    # The cluster's own policies are read only when they are the ones served.
    role = find(objects, "ClusterRole", RELEASE)
    vap = (("admissionregistration.k8s.io",), ("validatingadmissionpolicies", "validatingadmissionpolicybindings"))
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    if rules.get(vap) != (None if on else {"get", "list", "watch"}):
        fail(f"{variant}: policy and binding RBAC {rules.get(vap)} with policies from the cluster: {not on}")
    map_ = (("admissionregistration.k8s.io",), ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings"))
    if rules.get(map_) != (None if on else {"get", "list", "watch"}):
        fail(f"{variant}: MAP and binding RBAC {rules.get(map_)} with policies from the cluster: {not on}")
    # The TLS volume stays beside it when the certificate comes from a Secret.
    tls = variant_values(variant).get("certificates", {}).get("mode", "controller") != "controller"
    if any(v["name"] == "tls" for v in pod.get("volumes", [])) != tls:
        fail(f"{variant}: tls volume expected only with certificates from a Secret")


def check_mutating(variant, objects, hook, args):
    """mutating.enabled: one MutatingWebhookConfiguration, named as the validating one, calling
    /mutate on the same Service with the same caBundle (or cert-manager's injection), sideEffects
    None, reviews v1 and v1beta1, the values' matchPolicy, reinvocationPolicy (IfNeeded by
    default), failurePolicy (Ignore until seen ready or in observe mode, as the validating one)
    and timeout, rules never with DELETE, the release namespace and kube-system excluded, the
    validating webhook's matchConditions. Off (the default): no such object."""
    values = variant_values(variant)
    m = values.get("mutating", {})
    found = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    if not m.get("enabled", False):
        if found:
            fail(f"{variant}: a MutatingWebhookConfiguration without mutating.enabled")
        return
    if len(found) != 1 or found[0]["metadata"]["name"] != RELEASE or len(found[0]["webhooks"]) != 1:
        fail(f"{variant}: one MutatingWebhookConfiguration {RELEASE} with one webhook expected: {found}")
        return
    mw, vw = found[0]["webhooks"][0], hook["webhooks"][0]
    observe = values.get("mode") == "observe"
    fail_open = values.get("webhook", {}).get("failOpenUntilReady", True)
    timeout = m.get("timeoutSeconds", 5)
    expected = {
        "name": "mutate.celgate.dev",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "sideEffects": "None",
        "matchPolicy": m.get("matchPolicy", "Equivalent"),
        "reinvocationPolicy": m.get("reinvocationPolicy", "IfNeeded"),
        "failurePolicy": "Ignore" if fail_open or observe else m.get("failurePolicy", "Fail"),
        "timeoutSeconds": min(timeout, 2) if observe else timeout,
    }
    got = {k: mw.get(k) for k in expected}
    if got != expected:
        fail(f"{variant}: mutating webhook {got}, expected {expected}")
    service = dict(vw["clientConfig"]["service"], path="/mutate")
    if mw["clientConfig"].get("service") != service or mw["clientConfig"].get("caBundle") != vw["clientConfig"].get("caBundle"):
        fail(f"{variant}: the mutating webhook must call /mutate on the validating one's Service with its caBundle: {mw['clientConfig']}")
    if found[0]["metadata"].get("annotations") != hook["metadata"].get("annotations"):
        fail(f"{variant}: the mutating configuration's annotations (cert-manager's injection) differ from the validating one's")
    ops = {o for r in mw["rules"] for o in r["operations"]}
    if not mw["rules"] or ops - {"CREATE", "UPDATE", "CONNECT"}:
        fail(f"{variant}: mutating rules must not ask for DELETE (or '*'): {mw['rules']}")
    excluded = mw["namespaceSelector"]["matchExpressions"][0]
    wanted_excluded = set(m.get("excludedNamespaces", ["kube-system"])) | {NAMESPACE}
    if excluded["operator"] != "NotIn" or not wanted_excluded <= set(excluded["values"]):
        fail(f"{variant}: the mutating webhook must exclude {sorted(wanted_excluded)}: {excluded}")
    if {c["name"] for c in mw.get("matchConditions", [])} != {c["name"] for c in vw.get("matchConditions", [])}:
        fail(f"{variant}: the mutating webhook's matchConditions differ from the validating one's")
    # Every supported minor: rendered with its Capabilities, and each object valid there.
    for minor in MINORS:
        try:
            _, rendered, _ = render(with_image(values), kube_version=minor)
        except helm.HelmError as e:
            fail(f"{variant}: not rendered on Kubernetes {minor}: {e}")
            continue
        for obj in rendered:
            validate(variant, obj, versions=(minor,))


def check_dashboard(variant, objects, on):
    """The Grafana dashboard: off by default; when on, a ConfigMap the sidecar loads, whose
    JSON is a dashboard querying only metrics celgate exports."""
    maps = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    if not on:
        if maps:
            fail(f"{variant}: the dashboard is off by default")
        return
    if len(maps) != 1 or maps[0]["metadata"]["labels"].get("grafana_dashboard") != "1":
        fail(f"{variant}: one dashboard ConfigMap labelled grafana_dashboard=1 expected")
        return
    dash = json.loads(maps[0]["data"]["celgate.json"])
    exported = set(re.findall(r'"(celgate_[a-z_]+)"', (ROOT / "src/server/metrics.rs").read_text()))
    used = set()
    for p in dash["panels"]:
        for t in p["targets"]:
            used |= {m.removesuffix("_bucket") for m in re.findall(r"celgate_[a-z_]+", t["expr"])}
    unknown = used - exported
    if len(dash["panels"]) < 8 or unknown:
        fail(f"{variant}: dashboard panels {len(dash['panels'])}, unknown metrics {sorted(unknown)}")


# Per reports.format: its API group, its (namespaced, cluster) plurals, short names.
REPORT_KINDS = {
    "wgpolicy": ("wgpolicyk8s.io", ["policyreports", "clusterpolicyreports"], ["polr", "cpolr"]),
    "openreports": ("openreports.io", ["reports", "clusterreports"], ["reps", "creps"]),
}


def check_reports(variant, objects, args):
    """reports.enabled: celgate gets --reports with the format, interval and cap, and the Lease
    (also with Events off); a ClusterRole grants exactly create, get, list, patch and delete on the
    format's two report kinds, bound to celgate's service account. reports.installCRDs: the
    format's two CRDs, kept on uninstall, with the summary's printer columns. Off: none."""
    r = variant_values(variant).get("reports", {})
    on = r.get("enabled", False)
    fmt = r.get("format", "wgpolicy")
    flags = sorted(a for a in args if a.startswith("--reports"))
    wanted = sorted([f"--reports={fmt}", f"--reports-interval={r.get('interval', '10s')}",
                     f"--reports-max-results={r.get('maxResults', 2000)}",
                     f"--reports-max-resources={r.get('maxResources', 100000)}"]) if on else []
    if flags != wanted:
        fail(f"{variant}: report flags {flags}, expected {wanted}")
    events = variant_values(variant).get("celgate", {}).get("events", True)
    scans = variant_values(variant).get("background", {}).get("enabled", True)
    leased = on or events or scans
    lease = find(objects, "Role", f"{RELEASE}-lease")
    if (f"--lease-name={RELEASE}-events" in args) != leased or (lease is not None) != leased:
        fail(f"{variant}: the Lease (flag and Role) is needed exactly for Events, reports or background scans")
    role = find(objects, "ClusterRole", f"{RELEASE}-reports")
    binding = find(objects, "ClusterRoleBinding", f"{RELEASE}-reports")
    group, plurals, shorts = REPORT_KINDS[fmt]
    if not on:
        if role or binding:
            fail(f"{variant}: report RBAC without reports.enabled")
    else:
        expected = [{"apiGroups": [group], "resources": plurals, "verbs": ["create", "get", "list", "patch", "delete"]}]
        if role is None or role["rules"] != expected:
            fail(f"{variant}: report ClusterRole {role and role['rules']}, expected {expected}")
        if binding is None or (binding["subjects"][0]["name"], binding["subjects"][0]["namespace"]) != (RELEASE, NAMESPACE):
            fail(f"{variant}: the report ClusterRole must be bound to celgate's service account")
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    if not (on and r.get("installCRDs", False)):
        if crds:
            fail(f"{variant}: report CRDs rendered without reports.installCRDs")
        return
    names = sorted(o["metadata"]["name"] for o in crds)
    if names != sorted(f"{p}.{group}" for p in plurals):
        fail(f"{variant}: report CRDs {names}")
    for crd, plural, short in zip(sorted(crds, key=lambda o: plurals.index(o["spec"]["names"]["plural"])), plurals, shorts):
        spec = crd["spec"]
        scope = "Cluster" if plural.startswith("cluster") else "Namespaced"
        if spec["scope"] != scope or spec["names"]["shortNames"] != [short]:
            fail(f"{variant}: CRD {plural}: scope {spec['scope']}, short names {spec['names']['shortNames']}")
        if crd["metadata"].get("annotations", {}).get("helm.sh/resource-policy") != "keep":
            fail(f"{variant}: CRD {plural} must be kept on uninstall")
        columns = {c["name"]: c["jsonPath"] for c in spec["versions"][0]["additionalPrinterColumns"]}
        for count in ["pass", "fail", "warn", "error", "skip"]:
            if columns.get(count.capitalize()) != f".summary.{count}":
                fail(f"{variant}: CRD {plural} lacks the printer column {count.capitalize()}: {columns}")


def check_background(variant, objects, args):
    """background.enabled (the default): celgate gets the --background-* flags of the values
    and its service account, and a ClusterRole grants exactly get and list on
    background.rbacRules (by default common workload kinds: no `*`, no Secrets), bound to
    celgate's service account. Off: --background-interval=0, and no such RBAC."""
    b = variant_values(variant).get("background", {})
    on = b.get("enabled", True)
    flags = sorted(a for a in args if a.startswith(("--background", "--service-account")))
    wanted = sorted([
        f"--background-interval={b.get('interval', '1h')}",
        f"--background-qps={b.get('qps', 20)}",
        f"--background-concurrency={b.get('concurrency', 2)}",
        f"--background-page-size={b.get('pageSize', 500)}",
        f"--background-debounce={b.get('debounce', '5s')}",
        f"--service-account={NAMESPACE}:{RELEASE}",
    ]) if on else ["--background-interval=0"]
    if flags != wanted:
        fail(f"{variant}: background flags {flags}, expected {wanted}")
    role = find(objects, "ClusterRole", f"{RELEASE}-background")
    binding = find(objects, "ClusterRoleBinding", f"{RELEASE}-background")
    if not on:
        if role or binding:
            fail(f"{variant}: background RBAC without background.enabled")
        return
    rules = b.get("rbacRules")
    if rules is None:
        rules = yaml.safe_load((CHART / "values.yaml").read_text())["background"]["rbacRules"]
        wide = [r for r in rules if "*" in r["apiGroups"] + r["resources"] or "secrets" in r["resources"]]
        if wide:
            fail(f"{variant}: the default background RBAC grants a wildcard or Secrets: {wide}")
    expected = [{"apiGroups": r["apiGroups"], "resources": r["resources"], "verbs": ["get", "list"]} for r in rules]
    if role is None or role["rules"] != expected:
        fail(f"{variant}: background ClusterRole {role and role['rules']}, expected {expected}")
    if binding is None or (binding["subjects"][0]["name"], binding["subjects"][0]["namespace"]) != (RELEASE, NAMESPACE) \
            or binding["roleRef"]["name"] != f"{RELEASE}-background":
        fail(f"{variant}: the background ClusterRole must be bound to celgate's service account")


def check_certificate_controller(variant, objects, on, dep, ca):
    """Mode controller: celgate gets its Secret's name, the webhook's and the Service's DNS
    names; the chart renders no certificate; RBAC is that one Secret (and create) and that
    one webhook configuration. Other modes: none of it."""
    pod = dep["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    cert_args = [a for a in args if a.startswith("--cert-")]
    role = find(objects, "Role", f"{RELEASE}-certificates")
    cluster_role = find(objects, "ClusterRole", f"{RELEASE}-webhook-ca")
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and o["roleRef"]["name"] in (f"{RELEASE}-certificates", f"{RELEASE}-webhook-ca")]
    if not on:
        if cert_args or role or cluster_role or bindings:
            fail(f"{variant}: certificate controller flags or RBAC outside mode controller")
        return
    secret = f"{RELEASE}-tls"
    svc = f"{RELEASE}.{NAMESPACE}"
    wanted = {f"--cert-secret={secret}", f"--cert-namespace={NAMESPACE}", f"--cert-webhook={RELEASE}",
              f"--cert-dns-name={RELEASE}", f"--cert-dns-name={svc}", f"--cert-dns-name={svc}.svc",
              f"--cert-dns-name={svc}.svc.cluster.local"}
    if not wanted <= set(cert_args) or any(a.startswith("--tls-") for a in args):
        fail(f"{variant}: certificate controller flags {cert_args}, expected {sorted(wanted)}")
    tls_volumes = [v for v in pod.get("volumes", []) if v["name"] != "policies"]
    tls_mounts = [m for m in pod["containers"][0].get("volumeMounts", []) if m["name"] != "policies"]
    if ca or find(objects, "Secret") or tls_volumes or tls_mounts:
        fail(f"{variant}: mode controller renders no caBundle, Secret or certificate volume")
    rules = role["rules"] if role else []
    expected = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get", "update"]},
    ]
    if rules != expected:
        fail(f"{variant}: certificate Role {rules}, expected {expected}")
    rules = cluster_role["rules"] if cluster_role else []
    expected = [{"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
                 "resourceNames": [RELEASE], "verbs": ["get", "update"]}]
    mutating = variant_values(variant).get("mutating", {}).get("enabled", False)
    if mutating:
        expected.append({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
                         "resourceNames": [RELEASE], "verbs": ["get", "update"]})
    if (f"--cert-mutating-webhook={RELEASE}" in cert_args) != mutating:
        fail(f"{variant}: --cert-mutating-webhook must follow mutating.enabled: {cert_args}")
    if rules != expected:
        fail(f"{variant}: webhook caBundle ClusterRole {rules}, expected {expected}")
    if len(bindings) != 2 or any((b["subjects"][0]["name"], b["subjects"][0]["namespace"]) != (RELEASE, NAMESPACE)
                                 for b in bindings):
        fail(f"{variant}: the certificate Roles must be bound to celgate's service account: {bindings}")


def check_params(variant, objects, cluster_verbs, args):
    """Each rbac.paramResources entry is read access: cluster-wide without namespaces, else a
    Role bound to celgate's service account in each namespace and nothing cluster-wide; and
    celgate is told to read namespaced param kinds in those namespaces only."""
    entries = variant_values(variant).get("rbac", {}).get(
        "paramResources", [{"apiGroups": [""], "resources": ["configmaps"]}]
    )
    wanted = {}  # namespace ("" for cluster-wide) -> {(apiGroups, resources)}
    for e in entries:
        for ns in e.get("namespaces") or [""]:
            wanted.setdefault(ns, set()).add((tuple(e["apiGroups"]), tuple(e["resources"])))
    granted = {k for k in cluster_verbs if k[0] not in [("admissionregistration.k8s.io",), ("authorization.k8s.io",)]}
    granted.discard((("",), ("namespaces",)))
    granted.discard((("apiextensions.k8s.io",), ("customresourcedefinitions",)))
    if granted != wanted.get("", set()):
        fail(f"{variant}: ClusterRole param rules {granted}, expected {wanted.get('', set())}")
    roles = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == f"{RELEASE}-params"
    }
    bindings = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"] == f"{RELEASE}-params"
    }
    namespaced = {ns for ns in wanted if ns}
    flags = [a for a in args if a.startswith("--param-namespaces")]
    expected = [f"--param-namespaces={','.join(sorted(namespaced))}"] if namespaced else []
    if flags != expected:
        fail(f"{variant}: celgate's args have {flags}, expected {expected}")
    if set(roles) != namespaced or set(bindings) != namespaced:
        fail(f"{variant}: param Roles in {sorted(roles)}, bindings in {sorted(bindings)}, expected {sorted(namespaced)}")
        return
    for ns in namespaced:
        rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in roles[ns]["rules"]}
        if set(rules) != wanted[ns] or any(v != {"get", "list", "watch"} for v in rules.values()):
            fail(f"{variant}: param Role in {ns} grants {rules}, expected read access to {wanted[ns]}")
        b = bindings[ns]
        subject = b["subjects"][0]
        if b["roleRef"]["name"] != f"{RELEASE}-params" or (subject["name"], subject["namespace"]) != (RELEASE, NAMESPACE):
            fail(f"{variant}: param RoleBinding in {ns} must bind the Role to celgate's service account: {b}")


def check_fail_open():
    """The webhook's failurePolicy follows celgate's Deployment as the chart's lookup sees
    it. The SDK's lookup answers nothing (no cluster), so the cluster's answer is put in
    place of the lookup in a copy of the chart."""
    lookup = '{{- $dep := lookup "apps/v1" "Deployment" .Release.Namespace (include "celgate.fullname" .) }}'
    cases = [
        ("no Deployment (first install)", "{{- $dep := dict }}", {}, "Ignore"),
        ("no replica available", '{{- $dep := dict "status" (dict "replicas" 2) }}', {}, "Ignore"),
        ("a replica available", '{{- $dep := dict "status" (dict "availableReplicas" 1) }}', {}, "Fail"),
        ("available, failurePolicy Ignore", '{{- $dep := dict "status" (dict "availableReplicas" 2) }}',
         {"webhook": {"failurePolicy": "Ignore"}}, "Ignore"),
        ("unavailable, failOpenUntilReady false", "{{- $dep := dict }}",
         {"webhook": {"failOpenUntilReady": False}}, "Fail"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        chart = pathlib.Path(tmp) / "celgate"
        shutil.copytree(CHART, chart)
        helpers = chart / "templates" / "_helpers.tpl"
        original = helpers.read_text()
        if original.count(lookup) != 1:
            fail("fail-open: the Deployment lookup in _helpers.tpl changed; update this check")
            return
        for what, answer, values, expected in cases:
            helpers.write_text(original.replace(lookup, answer))
            values = dict(values, mutating={"enabled": True})
            try:
                _, objects, notes = render(with_image(values), chart)
            except helm.HelmError as e:
                fail(f"fail-open: {what}: not rendered: {e}")
                continue
            policy = find(objects, "ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"]
            wanted = values.get("webhook", {}).get("failurePolicy", "Fail")
            hinted = "--reuse-values" in notes
            # The mutating webhook (failurePolicy Fail) is fail-open exactly when the validating is.
            mutating = find(objects, "MutatingWebhookConfiguration")["webhooks"][0]["failurePolicy"]
            if mutating != ("Ignore" if policy != wanted else "Fail"):
                fail(f"fail-open: {what}: the mutating webhook's failurePolicy {mutating}, validating {policy}")
            if policy != expected or hinted != (policy != wanted):
                fail(f"fail-open: {what}: failurePolicy {policy} (expected {expected}), arming hint in NOTES: {hinted}")
            else:
                ok(f"fail-open: {what}: failurePolicy {policy}")


def variant_values(variant):
    return VARIANTS[variant]


NAMESPACE_OBJECT = f"""---
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
"""

DEPLOY_HEADER = f"""\
# celgate: plain manifests rendered from charts/celgate by `make chart` (release "{RELEASE}" in
# namespace "{NAMESPACE}", created here) with the chart's default values, except:
#   image.repository={IMAGE["image"]["repository"]}: celgate publishes no image; use yours.
# celgate makes its serving certificate at run time (certificates.mode controller): a CA and a
# certificate in the Secret {RELEASE}-tls, the CA injected into the webhook's caBundle, rotated
# before expiry; nothing secret is committed here, and no cert-manager is needed.
# The webhook is registered with failurePolicy Ignore (the chart's webhook.failOpenUntilReady),
# so that pods that never become ready cannot refuse every write; arm it once they are ready.
# Apply:
#   docker build -t REGISTRY/celgate:0.1.0 . && docker push REGISTRY/celgate:0.1.0
#   sed 's|{IMAGE["image"]["repository"]}:|REGISTRY/celgate:|' deploy/celgate.yaml | kubectl apply -f -
#   kubectl -n {NAMESPACE} rollout status deployment/{RELEASE}
#   kubectl patch validatingwebhookconfiguration {RELEASE} --type=json \\
#     -p '[{{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}}]'
# Remove the webhook first, so that no request waits on pods that are going away:
#   kubectl delete validatingwebhookconfiguration {RELEASE} && kubectl delete -f deploy/celgate.yaml
"""


def check_rendering(variant, values):
    before = len(failures)
    report = helm.lint(str(CHART), with_image(values), strict=True, namespace=NAMESPACE)
    problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2] + [
        {"error": e} for e in report.get("errors", []) or []
    ]
    for m in problems:
        fail(f"{variant}: lint: {m.get('path', '')} {m['error']}")
    try:
        _, objects, _ = render(with_image(values))
    except helm.HelmError as e:
        fail(f"{variant}: not rendered: {e}")
        return
    for obj in objects:
        validate(variant, obj)
    check_promises(variant, objects)
    if len(failures) == before:
        ok(f"{variant}: {len(objects)} objects rendered, linted and validated")


def check_kube_versions():
    """One story about versions: Chart.yaml's kubeVersion is FLOOR, both policy sources
    render under that minor's Capabilities, and README's modes table names it."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    if chart.get("kubeVersion") != f">={FLOOR}-0":
        fail(f"Chart.yaml kubeVersion {chart.get('kubeVersion')!r}, expected '>={FLOOR}-0'")
    else:
        ok(f"kubeVersion >={FLOOR}-0")
    folder = {"policies": {"fromConfigMap": "policies"}}
    for what, values in [("cluster policies", {}), ("folder policies", folder)]:
        try:
            render(with_image(values), kube_version=FLOOR)
            ok(f"{what} render on Kubernetes {FLOOR}")
        except helm.HelmError as e:
            fail(f"{what} on Kubernetes {FLOOR}: not rendered: {e}")
    readme = (ROOT / "README.md").read_text()
    table = "\n".join(l for l in readme.splitlines() if l.startswith("|"))
    minor = FLOOR.rsplit(".", 1)[0]
    if f"{minor}+" not in table:
        fail(f"README.md's modes table does not name Kubernetes {minor}+ (the chart's kubeVersion)")


def check_refused(what, values, needles):
    try:
        render(values)
        fail(f"invalid values accepted: {what}")
        return
    except helm.HelmError as e:
        message = str(e)
    missing = [n for n in needles if n not in message]
    if missing:
        fail(f"{what}: refused, but the error lacks {missing}: {message}")
    else:
        ok(f"invalid values refused: {what}")


def check_generated(path, text, write):
    if write:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    elif not path.exists() or path.read_text() != text:
        fail(f"{path.relative_to(ROOT)} is not current: run make chart")
    else:
        ok(f"{path.relative_to(ROOT)} is current")


def main():
    write = "--write" in sys.argv[1:]
    for variant, values in VARIANTS.items():
        check_rendering(variant, values)
    check_fail_open()
    check_kube_versions()
    for what, (values, needle) in INVALID.items():
        check_refused(what, with_image(values), [needle])
    check_refused("no image.repository", {}, NO_IMAGE_HINT)
    check_refused("empty image.repository", {"image": {"repository": ""}}, NO_IMAGE_HINT)
    # The plain manifests: default values. Certificates come from celgate's controller at run
    # time (a committed rendering of mode "generated" would hand every user the same key).
    text, _, _ = render(with_image(VARIANTS["default"]))
    validate("deploy/celgate.yaml", yaml.safe_load(NAMESPACE_OBJECT))
    check_generated(DEPLOY, DEPLOY_HEADER + NAMESPACE_OBJECT + text, write)
    readme, undescribed = chart_readme.render()
    if undescribed:
        fail("values without a comment in values.yaml (the README describes every value): " + ", ".join(undescribed))
    check_generated(chart_readme.README, readme, write)
    # The plain closing line CI reads as the check's count.
    print(f"chart-check: {len(passed)} passed, {len(failures)} failed")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
