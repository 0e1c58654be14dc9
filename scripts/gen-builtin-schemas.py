#!/usr/bin/env python3
"""Generates crates/celgate-engine/assets/builtin-schemas.json, the schemas `celgate lint` types built-in kinds with.

The source is the OpenAPI data that the k8s-openapi crate (a dependency of celgate) carries
for one Kubernetes version: each type's `json_schema!` body and each resource's GVK, plural
and scope. Only what decides a CEL type or a Go field type is kept (type, the formats CEL maps and the
number widths (int32, int64, double) a typed decode checks, properties,
items, additionalProperties, references and the x-kubernetes type extensions); references
stay references, resolved by celgate when a kind is looked up, as the API server's
definitions resolver does.

Where k8s-openapi departs from the Go OpenAPI definitions the API server resolves built-in
kinds with (`pkg/generated/openapi`), the Go definitions win:
- resource.Quantity has no `type` there (a v3 `oneOf` of string and number), so CEL does
  not see it: k8s-openapi marks it int-or-string;
- apiextensions v1 JSON has no `type` there: k8s-openapi says object.

Usage: scripts/gen-builtin-schemas.py [K8S_OPENAPI_SRC_DIR] [VERSION_MODULE] > crates/celgate-engine/assets/builtin-schemas.json
(defaults: the k8s-openapi 0.29 sources in ~/.cargo/registry, module v1_33).
"""

import glob
import json
import os
import re
import sys

KEEP_FORMATS = {"byte", "date", "date-time", "duration", "int-or-string", "int32", "int64", "double", "float"}
KEEP_EXT = (
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-preserve-unknown-fields",
)
# name -> compact schema, replacing what k8s-openapi says (see the docstring).
OVERRIDES = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {},
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON": {},
}


def source_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    found = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/k8s-openapi-0.29.*/src")))
    if not found:
        sys.exit("k8s-openapi 0.29 sources not found; pass the src directory")
    return found[-1]


def module_path(root, file):
    rel = os.path.relpath(os.path.dirname(file), root)
    return "crate::" + "::".join(p for p in rel.split(os.sep) if p not in (".", ""))


SUBSCHEMA = re.compile(
    r"\(\{\s*let mut schema_obj = __gen\.subschema_for::<([\w:]+)>\(\);.*?schema_obj\s*\}\)"
    r"|\(?__gen\.subschema_for::<([\w:]+)>\(\)\)?",
    re.S,
)


def body_to_json(body, names):
    def ref(m):
        path = m.group(1) or m.group(2)
        return json.dumps({"$ref": names.get(path, path)})

    text = SUBSCHEMA.sub(ref, body)
    text = re.sub(r",(\s*[}\]])", r"\1", text)  # trailing commas
    return json.loads(text)


def compact(s):
    if not isinstance(s, dict):
        return s
    out = {}
    if "$ref" in s:
        out["$ref"] = s["$ref"]
    t = s.get("type")
    if isinstance(t, str):
        out["type"] = t
    if s.get("format") in KEEP_FORMATS:
        out["format"] = s["format"]
    for ext in KEEP_EXT:
        if s.get(ext) is True:
            out[ext] = True
    if isinstance(s.get("properties"), dict):
        out["properties"] = {k: compact(v) for k, v in sorted(s["properties"].items())}
    if isinstance(s.get("items"), dict):
        out["items"] = compact(s["items"])
    ap = s.get("additionalProperties")
    if isinstance(ap, dict):
        out["additionalProperties"] = compact(ap)
    elif isinstance(ap, bool):
        out["additionalProperties"] = ap
    return out


def main():
    src = source_dir()
    module = sys.argv[2] if len(sys.argv) > 2 else "v1_33"
    root = os.path.join(src, module)
    files = sorted(glob.glob(os.path.join(root, "**", "*.rs"), recursive=True))
    impls = []  # (rust path, schema name, body)
    names = {}
    resources = []
    for f in files:
        text = open(f, encoding="utf-8").read()
        mod = module_path(root, f)
        for m in re.finditer(
            r"impl crate::schemars::JsonSchema for (\w+) \{\s*fn schema_name\(\)[^{]*\{\s*\"([^\"]+)\"\.into\(\)",
            text,
        ):
            names[f"{mod}::{m.group(1)}"] = m.group(2)
        for m in re.finditer(
            r"impl crate::schemars::JsonSchema for (\w+) \{.*?crate::schemars::json_schema!\((\{.*?\n        \})\)\n",
            text,
            re.S,
        ):
            impls.append((f"{mod}::{m.group(1)}", m.group(2)))
        for m in re.finditer(r"impl crate::Resource for (\w+) \{(.*?)\n\}", text, re.S):
            body = m.group(2)
            consts = dict(re.findall(r"const (\w+): &'static str = \"([^\"]*)\";", body))
            listable = re.search(rf"impl crate::ListableResource for {m.group(1)} \{{", text)
            if not listable:
                continue  # subresource kinds (Scale, Eviction...) are not top-level resources
            scope = "Namespaced" if "NamespaceResourceScope" in body else "Cluster"
            resources.append(
                {
                    "group": consts["GROUP"],
                    "version": consts["VERSION"],
                    "kind": consts["KIND"],
                    "plural": consts["URL_PATH_SEGMENT"],
                    "namespaced": scope == "Namespaced",
                    "schema": f"{mod}::{m.group(1)}",
                }
            )
    definitions = {}
    for path, body in impls:
        name = names[path]
        definitions[name] = OVERRIDES.get(name, compact(body_to_json(body, names)))
    for r in resources:
        r["schema"] = names[r["schema"]]
    resources.sort(key=lambda r: (r["group"], r["version"], r["kind"]))
    out = {
        "source": f"k8s-openapi {os.path.basename(os.path.dirname(src))} {module}, by scripts/gen-builtin-schemas.py",
        "resources": resources,
        "definitions": dict(sorted(definitions.items())),
    }
    json.dump(out, sys.stdout, separators=(",", ":"), sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
