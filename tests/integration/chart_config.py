"""Render the Helm chart with the real ``helm`` and hand its pieces to tests.

The chart tests (test_helm_chart.py) and the image end-to-end test share this: the
latter runs the sidecar image with the very config file and environment the chart
gives a pod, so what is tested in a container is what Kubernetes would run.
helm missing fails the test (``scripts/install-helm`` builds it); it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "delaybridge"
RELEASE = "rel"

Manifest = dict[str, Any]


def helm_binary() -> str:
    """The helm that scripts/install-helm builds: $HELM, then PATH, then $GOPATH/bin."""
    candidates = [os.environ.get("HELM", ""), shutil.which("helm") or ""]
    go = shutil.which("go")
    if go is not None:
        gopath = subprocess.run(
            [go, "env", "GOPATH"], capture_output=True, text=True, check=False
        ).stdout.strip()
        candidates.append(str(Path(gopath) / "bin" / "helm"))
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("helm not found (HELM, PATH, $GOPATH/bin): run scripts/install-helm", pytrace=False)


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False, timeout=120)


def render(helm: str, *args: str) -> list[Manifest]:
    """``helm template`` the chart (release ``rel``, namespace ``ns``) into objects."""
    done = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", "ns", *args)
    assert done.returncode == 0, f"helm template {' '.join(args)} failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def sidecar_config(manifests: list[Manifest]) -> str:
    """The sidecar's config.yaml, from the one ConfigMap holding it (not the dashboard's)."""
    (found,) = [m for m in by_kind(manifests, "ConfigMap") if "config.yaml" in m.get("data", {})]
    text: str = found["data"]["config.yaml"]
    return text


def one(manifests: list[Manifest], kind: str) -> Manifest:
    found = by_kind(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
    return found[0]


@dataclass(frozen=True)
class PodConfig:
    """What the chart gives a sidecar pod: its config file, args and plain env."""

    config_yaml: str
    args: list[str]
    # Env vars with their source: literal values, or "secret:<key>" / "field:<path>".
    env: dict[str, str]
    http_port: int


def pod_config(helm: str, *args: str) -> PodConfig:
    """Render the chart with ``args`` (``--set ...``, ``-f ...``) and extract the pod's
    view of it: the ConfigMap's file, the container's args and its env."""
    manifests = render(helm, *args)
    container = one(manifests, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    env: dict[str, str] = {}
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        if "secretKeyRef" in source:
            env[item["name"]] = f"secret:{source['secretKeyRef']['key']}"
        elif "fieldRef" in source:
            env[item["name"]] = f"field:{source['fieldRef']['fieldPath']}"
        else:
            env[item["name"]] = str(item.get("value", ""))
    return PodConfig(
        config_yaml=sidecar_config(manifests),
        args=list(container["args"]),
        env=env,
        http_port=int(container["ports"][0]["containerPort"]),
    )
