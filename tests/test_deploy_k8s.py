"""The Kubernetes manifests: valid against the Kubernetes schemas (kubernetes-validate, strict,
oldest and newest API versions it ships), buildable with kustomize when kubectl is installed,
wired together (selectors, probes, HPA target, secret keys), running the project's own
command lines, and an OTel Collector gateway config that forwards traces to our collector.
"""

from __future__ import annotations

import copy
import itertools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.deploy_commands import check_command_line

K8S = Path(__file__).resolve().parent.parent / "deploy" / "k8s"
OLDEST = "1.30.0"


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in documents() if doc["kind"] == kind}


def own_containers() -> list[tuple[str, dict[str, Any]]]:
    workloads = [*by_kind("Deployment").values(), *by_kind("Job").values()]
    return [(w["metadata"]["name"], c) for w in workloads
            for c in w["spec"]["template"]["spec"]["containers"]
            if c["image"].startswith("rewind:")]


def test_every_manifest_is_valid_against_the_kubernetes_schemas():
    seen = set()
    for _, doc in documents():
        for version in (OLDEST, kubernetes_validate.latest_version()):
            kubernetes_validate.validate(doc, version, strict=True)
        seen.add(doc["kind"])
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "Job", "Secret",
            "ConfigMap", "PodDisruptionBudget"} <= seen
    broken = copy.deepcopy(by_kind("Deployment")["rewind-collector"])
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["prot"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, OLDEST, strict=True)


def test_kustomization_lists_the_manifests_and_builds():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files - {"secret.example.yaml"}
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: kustomize build not checked")
    built = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True,
                           timeout=60)
    assert built.returncode == 0, built.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(built.stdout)]
    assert kinds.count("Deployment") == 3 and "HorizontalPodAutoscaler" in kinds


def test_containers_run_the_cli_commands_with_its_variables():
    for workload, container in own_containers():
        env = [e["name"] for e in container.get("env", [])]
        for reference in re.findall(r"\$\((\w+)\)", " ".join(container["command"])):
            assert reference in env, f"{workload}: $({reference}) is not set"
        check_command_line(container["command"], env, workload)


def test_probes_services_and_autoscaler_point_at_the_right_things():
    deployments, services = by_kind("Deployment"), by_kind("Service")
    secret_keys = set(by_kind("Secret")["rewind"]["stringData"])
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        service = services[name]
        assert service["spec"]["selector"].items() <= labels.items(), name
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
        for target in service["spec"]["ports"]:
            assert target["targetPort"] in port_names, f"{name}: {target}"
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"]["port"] in port_names, f"{name} {probe}"
        assert "limits" in container["resources"] and "requests" in container["resources"]
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            assert ref is None or ref["key"] in secret_keys, f"{name}: {ref}"
        command = container.get("command", [])
        for flag, port in itertools.pairwise(command):
            if flag.endswith("port"):
                assert int(port) in port_names.values(), f"{name}: {flag} {port} not exposed"
    collector = deployments["rewind-collector"]["spec"]["template"]["spec"]["containers"][0]
    assert collector["readinessProbe"]["httpGet"]["path"] == "/ready"
    [hpa] = by_kind("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "rewind-collector"}
    assert hpa["spec"]["minReplicas"] >= 2


def test_gateway_config_forwards_traces_to_the_rewind_collector():
    config = yaml.safe_load(by_kind("ConfigMap")["otel-gateway"]["data"]["config.yaml"])
    pipeline = config["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        for component in pipeline[kind]:
            assert component in config[kind], f"{kind}: {component} is not defined"
    exporter = config["exporters"]["otlp/rewind"]
    assert "otlp/rewind" in pipeline["exporters"]
    host, port = exporter["endpoint"].rsplit(":", 1)
    service = by_kind("Service")["rewind-collector"]
    assert host.split(".")[0] == "rewind-collector" and int(port) in [
        p["port"] for p in service["spec"]["ports"] if p["name"] == "otlp-grpc"]
    assert exporter["headers"]["authorization"].startswith("Bearer ${env:")
    [gateway] = by_kind("Deployment")["otel-gateway"]["spec"]["template"]["spec"]["containers"]
    assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+", gateway["image"])
