"""Turn Kubernetes' own OpenAPI document and CRDs into JSON schemas for kubeconform.

kubeconform validates manifests against one JSON schema per kind, normally fetched
from GitHub (yannh/kubernetes-json-schema). These machines reach only package
registries, so scripts/check-chart takes the same source those schemas are made
from — ``api/openapi-spec/swagger.json`` in the ``k8s.io/kubernetes`` Go module, and
the CRD manifests in the ``prometheus-operator`` Go module — and this script converts
them the way instrumenta/openapi2jsonschema does in "standalone strict" mode:

1. one file per group/version/kind, named as kubeconform's ``{{ .ResourceKind }}
   {{ .KindSuffix }}.json`` template expects (``statefulset-apps-v1.json``);
2. every definition the kind reaches is copied under ``definitions`` so that each
   file stands alone (recursive types stay ``$ref``s);
3. strict: an object schema with ``properties`` gets ``additionalProperties: false``
   (what ``kubectl --validate=strict`` does), so a misspelt field fails;
4. ``apiVersion`` and ``kind`` are pinned by ``enum``; IntOrString becomes
   string-or-integer, Quantity a number or a string in the quantity grammar, as the
   API server accepts them.

Usage: ``k8s_json_schemas.py OUT_DIR --swagger swagger.json [--crd crd.yaml ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

Schema = dict[str, Any]

REF_PREFIX = "#/definitions/"
INT_OR_STRING: Schema = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
# The API server's quantity grammar (resource.Quantity), as controller-gen writes it
# into CRDs: a number with an optional binary (Ki..Ei), decimal (n..E) or exponent suffix.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY: Schema = {"oneOf": [{"type": "string", "pattern": QUANTITY_PATTERN}, {"type": "number"}]}
QUANTITY_NAME = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def schema_file_name(group: str, version: str, kind: str) -> str:
    """The file name kubeconform derives from a manifest's apiVersion and kind."""
    suffix = f"-{group.split('.')[0].lower()}-{version.lower()}" if group else f"-{version.lower()}"
    return f"{kind.lower()}{suffix}.json"


def strict(node: Any, *, root: bool = True) -> Any:
    """Return a copy of ``node`` with the four conversions of the module docstring."""
    if isinstance(node, list):
        return [strict(item, root=False) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
        return {**INT_OR_STRING, **_describe(node)}
    out = {key: strict(value, root=False) for key, value in node.items()}
    open_ended = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in node and "additionalProperties" not in node and not open_ended:
        out["additionalProperties"] = False
    if root and "$ref" in out:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def _describe(node: Schema) -> Schema:
    return {"description": node["description"]} if "description" in node else {}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            yield ref[len(REF_PREFIX) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def reachable(name: str, definitions: dict[str, Schema]) -> dict[str, Schema]:
    """Every definition ``name`` refers to, directly or not, itself included."""
    seen: dict[str, Schema] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        if current not in definitions:
            raise KeyError(f"swagger definition {current!r} is referenced but not defined")
        seen[current] = definitions[current]
        todo.extend(_refs(definitions[current]))
    return seen


def builtin_schemas(swagger: Schema) -> Iterator[tuple[str, Schema]]:
    """(file name, schema) for every kind in Kubernetes' swagger document."""
    definitions: dict[str, Schema] = dict(swagger["definitions"])
    definitions[QUANTITY_NAME] = {**QUANTITY, **_describe(definitions[QUANTITY_NAME])}
    converted = {name: strict(schema) for name, schema in definitions.items()}
    for name, schema in definitions.items():
        gvks = schema.get("x-kubernetes-group-version-kind", [])
        if len(gvks) != 1:  # 0: not a kind; >1: meta types such as DeleteOptions
            continue
        gvk = gvks[0]
        group, version, kind = gvk["group"], gvk["version"], gvk["kind"]
        api_version = f"{group}/{version}" if group else version
        root = json.loads(json.dumps(converted[name]))
        props = root.setdefault("properties", {})
        props["apiVersion"] = {**props.get("apiVersion", {}), "enum": [api_version]}
        props["kind"] = {**props.get("kind", {}), "enum": [kind]}
        needed = reachable(name, definitions)
        needed.pop(name)
        root["definitions"] = {dep: converted[dep] for dep in sorted(needed)}
        root["$schema"] = "http://json-schema.org/draft-07/schema#"
        yield schema_file_name(group, version, kind), root


def crd_schemas(crd: Schema, source: Path) -> Iterator[tuple[str, Schema]]:
    """(file name, schema) for every served version of a CustomResourceDefinition."""
    if crd.get("kind") != "CustomResourceDefinition":
        return
    spec = crd["spec"]
    for version in spec.get("versions", []):
        openapi = version.get("schema", {}).get("openAPIV3Schema")
        if openapi is None:
            raise ValueError(
                f"{source}: CRD {crd['metadata']['name']} {version['name']} has no schema"
            )
        root = strict(openapi)
        props = root.setdefault("properties", {})
        props["apiVersion"] = {"type": "string", "enum": [f"{spec['group']}/{version['name']}"]}
        props["kind"] = {"type": "string", "enum": [spec["names"]["kind"]]}
        yield schema_file_name(spec["group"], version["name"], spec["names"]["kind"]), root


def write_all(out_dir: Path, schemas: Iterator[tuple[str, Schema]]) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    for file_name, schema in schemas:
        if file_name in written:
            raise ValueError(f"two kinds map to the same schema file {out_dir / file_name}")
        written.add(file_name)
        (out_dir / file_name).write_text(json.dumps(schema, indent=1) + "\n", encoding="utf-8")
    return len(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--swagger", type=Path, required=True, help="Kubernetes swagger.json")
    parser.add_argument("--crd", type=Path, action="append", default=[], help="CRD YAML file")
    args = parser.parse_args(argv)

    def every() -> Iterator[tuple[str, Schema]]:
        yield from builtin_schemas(json.loads(args.swagger.read_text(encoding="utf-8")))
        for path in args.crd:
            for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                if document:
                    yield from crd_schemas(document, path)

    count = write_all(args.out_dir, every())
    print(f"k8s_json_schemas: wrote {count} schemas to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
