"""docker-compose.yml and the Dockerfile: valid by the compose specification's own JSON schema
(as shipped by check-jsonschema), pinned images, files that exist, and services that are the
project's own commands: each command line parses with the CLI's click definitions, its
environment names are that command's variables, and the very command line starts here (on
loopback, an embedded store and free ports), answers the compose health check and takes only
the tokens from the file its compose environment names.
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema
import yaml

from tests.support.deploy_commands import check_command_line, cli_command
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
# A request each service only answers with a token: (method, path).
PROTECTED = {"collector": ("POST", "/v1/traces"), "worker": ("GET", "/v1/traces")}
COMPOSE = ROOT / "docker-compose.yml"
OWN_IMAGE = "rewind:"


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def compose_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(resources.files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("compose-spec.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]


def own_services(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in document["services"].items()
            if str(s.get("image", "")).startswith(OWN_IMAGE)}


def test_compose_file_is_valid_by_the_compose_spec_schema():
    document = compose()
    assert compose_errors(document) == []
    broken = copy.deepcopy(document)
    broken["services"]["collector"]["healthcheck"]["retry"] = 5  # a typo of retries
    broken["services"]["worker"]["depends_on"]["migrate"]["condition"] = "when_ready"
    errors = " ".join(compose_errors(broken))
    assert "healthcheck: 'retry' does not match" in errors and "when_ready" in errors


def test_images_are_pinned_and_the_project_image_is_built_here():
    for name, service in compose()["services"].items():
        image = service["image"]
        assert re.fullmatch(r"[\w./-]+:\d+(\.\d+)+", image), f"{name}: unpinned image {image}"
    built = own_services(compose())
    assert set(built) == {"migrate", "collector", "worker"}
    assert all(s["build"]["context"] == "." for s in built.values())


def test_dockerfile_builds_one_non_root_image_with_every_package():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for base in re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE):
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), base
    for folder in ("exporter", "collector", "replay"):
        assert f"COPY {folder} {folder}" in dockerfile and (ROOT / folder).is_dir()
    assert re.search(r"^USER 10001", dockerfile, re.MULTILINE)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".rewind", ".env"} <= set(ignored)


def test_mounted_files_secrets_and_env_file_line_up():
    document = compose()
    for name, service in document["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    grafana = document["services"]["grafana"]
    provider = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/dashboards/rewind.yaml").read_text())
    dashboards = [v for v in grafana["volumes"] if v.startswith("./deploy/grafana/dashboards:")]
    assert dashboards and dashboards[0].split(":")[1] == provider["providers"][0]["options"]["path"]
    example = (ROOT / "deploy" / "rewind.env.example").read_text()
    defined = set(re.findall(r"^([A-Z_]+)=", example, re.MULTILINE))
    used = set(re.findall(r"\$\{([A-Z_]+)", COMPOSE.read_text()))
    used |= {s["environment"] for s in document["secrets"].values()}
    assert used == defined, "the env file example and docker-compose.yml disagree"
    for name, service in own_services(document).items():
        for key, value in service.get("environment", {}).items():
            if key.endswith("_TOKENS_FILE"):
                secret = value.removeprefix("/run/secrets/")
                assert secret in service["secrets"] and secret in document["secrets"], name


def test_compose_commands_are_the_cli_commands():
    for name, service in own_services(compose()).items():
        check_command_line(service["command"], list(service.get("environment", {})), name)


def _localised(service: dict[str, Any], tmp: Path) -> tuple[list[str], dict[str, str], dict]:
    """The compose command and environment with this machine's values: the embedded store,
    loopback, free ports, token files. Names and flags stay as compose has them."""
    argv, ports = list(service["command"]), {}
    for i, arg in enumerate(argv[:-1]):
        if arg == "--clickhouse":
            argv[i + 1] = f"chdb://{tmp / 'store'}"
        elif arg == "--host":
            argv[i + 1] = "127.0.0.1"
        elif arg.endswith("-port") or arg == "--port":
            ports[argv[i + 1]] = str(free_port())
            argv[i + 1] = ports[argv[i + 1]]
    env = {}
    for key, value in service.get("environment", {}).items():
        if key.endswith("_TOKENS_FILE"):
            (tmp / key).write_text("a-test-token team-a\n")
            value = str(tmp / key)
        elif key == "REWIND_SPOOL_DIR":
            value = str(tmp / "spool")
        env[key] = str(value)
    return [sys.executable, "-m", "rewind.replay.cli.main", *argv[1:]], env, ports


def _health_url(service: dict[str, Any], ports: dict[str, str]) -> str:
    found = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", " ".join(service["healthcheck"]["test"]))
    assert found, "the health check calls an HTTP endpoint on the service's own port"
    return f"http://127.0.0.1:{ports[found.group(1)]}{found.group(2)}"


def _stop(process: subprocess.Popen) -> None:
    """What ``docker compose stop`` does: SIGTERM, then a kill after the grace period."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_compose_command_lines_start_here_and_pass_their_health_checks(tmp_path):
    services = own_services(compose())
    for name in ("migrate", "collector", "worker"):  # compose's start order
        cli_command(services[name]["command"])
    argv, env, _ = _localised(services["migrate"], tmp_path)
    done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for name in ("collector", "worker"):
        argv, env, ports = _localised(services[name], tmp_path)
        url = _health_url(services[name], ports)
        process = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            deadline, status = time.monotonic() + 90, None
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    status = httpx.get(url, timeout=2).status_code
                    if status == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.3)
            assert status == 200, f"{name}: {url} -> {status}; exit {process.poll()}"
            # The token file named in compose's environment is the one in force.
            method, path = PROTECTED[name]
            target = urlsplit(url)._replace(path=path).geturl()
            headers = {"content-type": "application/x-protobuf"}
            refused = httpx.request(method, target, content=b"", headers=headers, timeout=10)
            headers["authorization"] = "Bearer a-test-token"
            allowed = httpx.request(method, target, content=b"", headers=headers, timeout=10)
            assert (refused.status_code, allowed.status_code) == (401, 200), name
        finally:
            _stop(process)
        output = process.stdout.read() if process.stdout else ""
        assert process.returncode in (0, -signal.SIGTERM), f"{name}:\n{output}"
