#!/usr/bin/env python3
"""Helpers for tests/gen/verify.sh (Python 3 standard library only).

  check.py lint DIR                 static checks of crds/, samples/, expected/, invalid/
  check.py collection DIR SAMPLE NS the collection URL path the SAMPLE is created in
  check.py status-body CREATED SAMPLE   the created object with SAMPLE's status, for PUT .../status
  check.py compare GOT WANT         exit 1 (and print the differences) unless GOT and WANT
                                    are equal outside metadata

compare is exact: object members by name (order ignored: the apiserver sorts
them), arrays element by element, strings, booleans and null as such, and
numbers by their exact decimal value - the apiserver re-encodes numbers
(1.0 -> 1, 1e3 -> 1000, -0 -> 0, -2.5E+10 -> -25000000000, 1.5e-7 ->
1.5e-7), which is the same value, but an integer that lost precision
(9007199254740993 -> 9007199254740992) or a float that was rounded is a
difference. A number never equals a boolean.
"""
import json
import os
import sys
from decimal import Decimal

try:
    import yaml  # only for lint, which fails without it
except ImportError:  # pragma: no cover
    yaml = None


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_float=Decimal, parse_int=int)


def is_num(v):
    return isinstance(v, (int, Decimal)) and not isinstance(v, bool)


def diff(a, b, path, out):
    if is_num(a) and is_num(b):
        if Decimal(a) != Decimal(b):
            out.append(f"{path}: got {a} want {b}")
        return
    if type(a) is not type(b):
        out.append(f"{path}: got {json.dumps(a, default=str)} want {json.dumps(b, default=str)}")
        return
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            p = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
            if key not in a:
                out.append(f"{p}: missing (pruned or dropped?), want {json.dumps(b[key], default=str)[:200]}")
            elif key not in b:
                out.append(f"{p}: unexpected {json.dumps(a[key], default=str)[:200]}")
            else:
                diff(a[key], b[key], p, out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: got {len(a)} elements want {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: got {json.dumps(a)} want {json.dumps(b)}")


def compare(got_path, want_path):
    got, want = load_json(got_path), load_json(want_path)
    out = []
    for key in sorted((set(got) | set(want)) - {"metadata"}):
        if key not in got:
            out.append(f".{key}: missing")
        elif key not in want:
            out.append(f".{key}: unexpected")
        else:
            diff(got[key], want[key], "." + key, out)
    for line in out[:40]:
        print("  " + line)
    if len(out) > 40:
        print(f"  ... and {len(out) - 40} more")
    return 1 if out else 0


def status_body(created_path, sample_path):
    # Plain json: a float goes through a double here as it does in the
    # apiserver, and integers stay exact.
    with open(created_path, encoding="utf-8") as f:
        created = json.load(f)
    with open(sample_path, encoding="utf-8") as f:
        sample = json.load(f)
    created["status"] = sample["status"]
    json.dump(created, sys.stdout)
    return 0


def collection(d, sample_path, namespace):
    obj = load_json(sample_path)
    for _, _, docs in crd_docs(d):
        for doc in docs:
            s = doc["spec"]
            for v in s["versions"]:
                if f'{s["group"]}/{v["name"]}' == obj["apiVersion"] and s["names"]["kind"] == obj["kind"]:
                    print(f'/apis/{obj["apiVersion"]}/namespaces/{namespace}/{s["names"]["plural"]}')
                    return 0
    print(f"{sample_path}: no CRD serves {obj['apiVersion']} {obj['kind']}", file=sys.stderr)
    return 1


def crd_docs(d):
    out = []
    for name in sorted(os.listdir(os.path.join(d, "crds"))):
        if name.endswith(".yaml"):
            path = os.path.join(d, "crds", name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            docs = [x for x in yaml.safe_load_all(text) if x is not None]
            out.append((name, text, docs))
    return out


def unsorted_keys(node, path, out):
    if isinstance(node, dict):
        keys = list(node)
        if keys != sorted(keys):
            out.append(f"{path or '/'}: keys not sorted: {keys}")
        for k, v in node.items():
            unsorted_keys(v, f"{path}/{k}", out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            unsorted_keys(v, f"{path}/{i}", out)


def lint(d):
    errs = []
    if yaml is None:
        errs.append("lint: PyYAML is not installed (Debian: python3-yaml; scripts/bootstrap installs it)")
    else:
        for name, text, docs in crd_docs(d):
            if not text.startswith("#"):
                errs.append(f"crds/{name}: does not start with a comment")
            if len(docs) != 1 or docs[0].get("kind") != "CustomResourceDefinition":
                errs.append(f"crds/{name}: want exactly one CustomResourceDefinition")
                continue
            doc = docs[0]
            out = []
            unsorted_keys(doc, "", out)
            errs += [f"crds/{name}: {e}" for e in out]
            s = doc["spec"]
            if s["group"] != "gen.kcr.test" or s["scope"] != "Namespaced":
                errs.append(f"crds/{name}: group/scope")
            if doc["metadata"]["name"] != f'{s["names"]["plural"]}.gen.kcr.test':
                errs.append(f"crds/{name}: metadata.name is not <plural>.gen.kcr.test")
            for v in s["versions"]:
                if v.get("subresources") != {"status": {}}:
                    errs.append(f"crds/{name}: version {v['name']} lacks subresources: {{status: {{}}}}")
    kinds = {}
    for sub in ("samples", "expected", "invalid"):
        p = os.path.join(d, sub)
        for name in sorted(os.listdir(p)) if os.path.isdir(p) else []:
            if not name.endswith(".json"):
                continue
            try:
                obj = load_json(os.path.join(p, name))
            except ValueError as e:
                errs.append(f"{sub}/{name}: {e}")
                continue
            stem = name[:-5]
            md = obj.get("metadata", {})
            if "namespace" in md:
                errs.append(f"{sub}/{name}: metadata.namespace must be left out")
            if md.get("name") != stem:
                errs.append(f"{sub}/{name}: metadata.name is not {stem!r}")
            if sub == "samples":
                kinds.setdefault(obj.get("kind", "?"), []).append(stem)
                if not stem.startswith(obj.get("kind", "?").lower() + "-"):
                    errs.append(f"{sub}/{name}: name is not <kind-lowercase>-<n>")
            if sub == "expected" and not os.path.exists(os.path.join(d, "samples", name)):
                errs.append(f"{sub}/{name}: no sample of that name")
    for kind, names in sorted(kinds.items()):
        if len(names) < 2:
            errs.append(f"samples: kind {kind} has fewer than two samples")
    for e in errs:
        print("lint: " + e)
    return 1 if errs else 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "lint" and len(argv) == 3:
        return lint(argv[2])
    if cmd == "collection" and len(argv) == 5:
        return collection(argv[2], argv[3], argv[4])
    if cmd == "status-body" and len(argv) == 4:
        return status_body(argv[2], argv[3])
    if cmd == "compare" and len(argv) == 4:
        return compare(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
