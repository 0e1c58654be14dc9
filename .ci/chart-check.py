#!/usr/bin/env python3
"""Renders and lints charts/celgate with its default values and with each certificate mode,
validates every rendered object against the Kubernetes schemas (oldest and newest supported
minor), checks the properties the chart promises, and checks that deploy/celgate.yaml is the
chart's current rendering.

    python3 .ci/chart-check.py            # check (CI)
    python3 .ci/chart-check.py --write    # re-render deploy/celgate.yaml

Needs helm-python-sdk (Helm's Go SDK, no helm binary) and kubernetes-validate from PyPI.
"""

import copy
import pathlib
import sys

import helm_python as helm
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "celgate"
DEPLOY = ROOT / "deploy" / "celgate.yaml"
RELEASE, NAMESPACE = "celgate", "celgate-system"
# The chart's kubeVersion floor and the newest schemas available.
KUBE_VERSIONS = ["1.30.0", "1.37.0"]
# Kinds from CRDs, which kubernetes-validate has no schema for: checked by the required
# fields of their CRDs here instead.
CRD_REQUIRED = {
    ("cert-manager.io/v1", "Issuer"): [],
    ("cert-manager.io/v1", "Certificate"): ["secretName", "issuerRef"],
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ["selector"],
}

VARIANTS = {
    "default": {},
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
        "serviceMonitor": {"enabled": True},
        "networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]},
        "celgate": {"events": False, "k8sVersion": "1.33"},
        "rbac": {"paramResources": [{"apiGroups": ["policy.example.com"], "resources": ["limits"]}]},
    },
}

# Values the schema must refuse.
INVALID = {
    "failurePolicy": {"webhook": {"failurePolicy": "Sometimes"}},
    "timeout": {"webhook": {"timeoutSeconds": 60}},
    "unknown key": {"webhok": {}},
    "certificate mode": {"certificates": {"mode": "selfmade"}},
}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}")


def render(values):
    chart = helm.Chart.load(str(CHART))
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    text = "".join(
        f"---\n# Source: {path}\n{body.strip()}\n"
        for path, body in sorted(manifests.items())
        if body.strip() and not path.endswith("NOTES.txt")
    )
    objects = [o for o in yaml.safe_load_all(text) if o]
    return text, objects


def validate(variant, obj):
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
    for version in KUBE_VERSIONS:
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
    if w["failurePolicy"] != "Fail" or w["matchPolicy"] != "Equivalent" or w["timeoutSeconds"] != 5:
        fail(f"{variant}: webhook defaults changed: {w}")
    conditions = {c["name"] for c in w.get("matchConditions", [])}
    if not {"not-an-auth-review", "not-a-lease", "not-a-node-heartbeat"} <= conditions:
        fail(f"{variant}: auth reviews, leases and node heartbeats must never reach celgate: {conditions}")
    mode = variant_values(variant).get("certificates", {}).get("mode", "generated")
    ca = w["clientConfig"].get("caBundle")
    if mode == "certManager":
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
    if "--source=kubernetes" not in c["args"]:
        fail(f"{variant}: celgate must read the cluster's policies")
    autoscaled = variant == "everything-on"
    if not autoscaled and dep["spec"]["replicas"] != 2:
        fail(f"{variant}: 2 replicas expected")
    if "podAntiAffinity" not in pod.get("affinity", {}):
        fail(f"{variant}: anti-affinity expected")
    if find(objects, "PodDisruptionBudget") is None:
        fail(f"{variant}: PodDisruptionBudget expected")
    role = find(objects, "ClusterRole")
    verbs = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    if any(v - {"get", "list", "watch"} for k, v in verbs.items() if k[0] != ("authorization.k8s.io",)):
        fail(f"{variant}: the ClusterRole may only read, besides SubjectAccessReviews: {verbs}")
    for kind in ["HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"]:
        if (find(objects, kind) is not None) != autoscaled:
            fail(f"{variant}: {kind} is optional and off by default")


def variant_values(variant):
    return VARIANTS[variant]


def main():
    write = "--write" in sys.argv[1:]
    for variant, values in VARIANTS.items():
        before = len(failures)
        report = helm.lint(str(CHART), copy.deepcopy(values), strict=True, namespace=NAMESPACE)
        problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2] + [
            {"error": e} for e in report.get("errors", []) or []
        ]
        for m in problems:
            fail(f"{variant}: lint: {m.get('path', '')} {m['error']}")
        _, objects = render(copy.deepcopy(values))
        for obj in objects:
            validate(variant, obj)
        check_promises(variant, objects)
        if len(failures) == before:
            print(f"ok   {variant}: {len(objects)} objects rendered, linted and validated")
    for what, values in INVALID.items():
        try:
            render(values)
            fail(f"invalid values accepted: {what}")
        except helm.HelmError:
            print(f"ok   invalid values refused: {what}")
    # The plain manifests: default values, with certificates from cert-manager, because a
    # committed rendering of mode "generated" would hand every user the same private key.
    text, _ = render(VARIANTS["cert-manager"])
    header = (
        "# celgate: plain manifests rendered from charts/celgate (release \"celgate\" in namespace\n"
        "# \"celgate-system\") with default values, except certificates.mode=certManager: the serving\n"
        "# certificate is issued by cert-manager in the cluster, never committed. Create the\n"
        "# namespace first. Regenerate with: python3 .ci/chart-check.py --write\n"
    )
    rendered = header + text
    if write:
        DEPLOY.parent.mkdir(exist_ok=True)
        DEPLOY.write_text(rendered)
        print(f"wrote {DEPLOY.relative_to(ROOT)}")
    elif not DEPLOY.exists() or DEPLOY.read_text() != rendered:
        fail("deploy/celgate.yaml is not the chart's current rendering: run python3 .ci/chart-check.py --write")
    if failures:
        print(f"chart check: {len(failures)} failure(s)")
        sys.exit(1)
    print("chart check: all renderings linted and valid")


if __name__ == "__main__":
    main()
