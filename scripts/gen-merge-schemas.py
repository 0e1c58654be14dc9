#!/usr/bin/env python3
"""Generates crates/celgate-engine/assets/merge-schemas.json, the structured-merge-diff
schema of the built-in kinds that MutatingAdmissionPolicy's ApplyConfiguration merge uses.

The source is client-go's `applyconfigurations/internal/internal.go` (its `schemaYAML`), the
SMD schema applyconfiguration-gen derives from the Kubernetes OpenAPI definitions: the same
conversion the API server's static type converter makes for built-in types. Read from a
client-go git mirror at the newest tag of one minor version (Kubernetes 1.32 = v0.32.x,
the version the MAP recordings came from).

Kept: every type with its scalar kind, list (element type, elementRelationship
atomic/associative, keys) and map (fields with their defaults, element type,
elementRelationship atomic/separable). Dropped: unions (a merge does not read them).
The kinds come from the built-in kinds table `celgate lint` uses
(crates/celgate-engine/assets/builtin-schemas.json, `resources`): each resource kind whose
definition is among the types is listed as `kinds: [[group, version, kind, type]]`, so
the merge finds a kind's type without depending on lint. A kind outside the table (an
options or subresource kind such as PodExecOptions or autoscaling/v1 Scale) has no type,
as the API server answers for them (`no corresponding type`).

Keys are shortened to keep the embedded file small:
  atom: s = scalar, l = list, m = map
  list: e = elementType, r = elementRelationship, k = keys
  map:  f = fields [[name, type, default?]], e = elementType, r = elementRelationship
  type reference: n = namedType (with r when the reference overrides the relationship),
                  or an inline atom

Usage (from the repository root): scripts/gen-merge-schemas.py [CLIENT_GO_GIT_DIR] [TAG] > crates/celgate-engine/assets/merge-schemas.json
(defaults: /work/.mirror/kubernetes+client-go/repo and its newest v0.32.x tag).
"""

import json
import os
import re
import subprocess
import sys

import yaml

PATH = "applyconfigurations/internal/internal.go"
KINDS_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "celgate-engine", "assets", "builtin-schemas.json")


def newest_tag(git_dir, prefix="v0.32."):
    tags = subprocess.run(
        ["git", "-C", git_dir, "tag", "-l", prefix + "*"], check=True, capture_output=True, text=True
    ).stdout.split()
    tags = [t for t in tags if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    if not tags:
        sys.exit(f"no {prefix}* tag in {git_dir}")
    return max(tags, key=lambda t: tuple(int(p) for p in t[1:].split(".")))


def schema_yaml(source):
    m = re.search(r"var schemaYAML = typed\.YAMLObject\(`(.*?)`\)", source, re.S)
    if not m:
        sys.exit("schemaYAML not found")
    return yaml.safe_load(m.group(1))


def type_ref(t):
    if "namedType" in t:
        out = {"n": t["namedType"]}
        if "elementRelationship" in t:
            out["r"] = t["elementRelationship"]
        return out
    return atom(t)


def atom(a):
    out = {}
    if "scalar" in a:
        out["s"] = a["scalar"]
    if "list" in a:
        lst = a["list"]
        out["l"] = {"e": type_ref(lst["elementType"])}
        if "elementRelationship" in lst:
            out["l"]["r"] = lst["elementRelationship"]
        if lst.get("keys"):
            out["l"]["k"] = lst["keys"]
    if "map" in a:
        m = a["map"]
        cm = {}
        if m.get("fields"):
            fields = []
            for f in m["fields"]:
                entry = [f["name"], type_ref(f["type"])]
                if "default" in f:
                    entry.append(f["default"])
                fields.append(entry)
            cm["f"] = fields
        if "elementType" in m:
            cm["e"] = type_ref(m["elementType"])
        if "elementRelationship" in m:
            cm["r"] = m["elementRelationship"]
        out["m"] = cm
    return out


def main():
    git_dir = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/kubernetes+client-go/repo"
    tag = sys.argv[2] if len(sys.argv) > 2 else newest_tag(git_dir)
    source = subprocess.run(
        ["git", "-C", git_dir, "show", f"{tag}:{PATH}"], check=True, capture_output=True, text=True
    ).stdout
    types = {t["name"]: atom(t) for t in schema_yaml(source)["types"]}
    with open(KINDS_TABLE) as f:
        resources = json.load(f)["resources"]
    kinds = sorted(
        {(r["group"], r["version"], r["kind"], r["schema"]) for r in resources if r["schema"] in types}
    )
    doc = {"source": f"k8s.io/client-go {tag} {PATH}", "kinds": [list(k) for k in kinds], "types": types}
    json.dump(doc, sys.stdout, separators=(",", ":"), sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
