"""The deployment files are checked: the Kubernetes manifests against Kubernetes' schemas (strict, a fixed
version), and every command, flag, variable, port and path that docker-compose.yml, the Containerfile and
the manifests name against the code (each ``paimon-meta`` invocation is parsed with the settings it would
get, files mounted where the manifests mount them)."""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from paimon_meta.cli.config import ENV_CONFIG, SECRET_DESTS, Layers
from paimon_meta.cli.main import build_parser, parse
from paimon_meta.db.embedded import ENV_HOME
from paimon_meta.db.migrate import _ENV_SCRIPT_LOCATION
from paimon_meta.rest import paths
from tests.fixtures.service import REPO

#: The Kubernetes version the manifests are validated against (raise it deliberately).
KUBERNETES_VERSION = "1.32.0"
DEPLOY = Path(REPO) / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
CONTAINERFILE = DEPLOY / "Containerfile"
COMPOSE = Path(REPO) / "docker-compose.yml"
IMAGE = "paimon-meta"


def _known_env() -> set[str]:
    layers = Layers(build_parser())
    names = {s.env for s in layers.every()}
    names |= {s.env + "_FILE" for s in layers.globals if s.dest in SECRET_DESTS}
    return names | {ENV_CONFIG, ENV_HOME, _ENV_SCRIPT_LOCATION}


KNOWN_ENV = _known_env()
#: Every flag spelled out (argparse would also take an abbreviation, which a file must not rely on).
KNOWN_FLAGS = {f for s in Layers(build_parser()).every() for f in s.action.option_strings} | {"--config"}


def _parse(where: str, argv: list[str], env: dict[str, str]) -> Any:
    inexact = [w.split("=")[0] for w in argv if w.startswith("-") and w.split("=")[0] not in KNOWN_FLAGS]
    assert not inexact, f"{where}: flags the code does not have (spelled out): {inexact}"
    return parse(argv, env)


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


MANIFESTS = _manifests()


def _kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in MANIFESTS if doc["kind"] == kind]


@pytest.mark.parametrize("doc", [d for _, d in MANIFESTS], ids=[n for n, _ in MANIFESTS])
def test_manifest_is_valid_kubernetes(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_strict_validation_refuses_a_misspelt_field() -> None:
    """The check above can fail: a field Kubernetes does not have is refused."""
    deployment = copy.deepcopy(_kind("Deployment")[0])
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readynessProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    files = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    assert [i["name"] for i in kustomization["images"]] == [IMAGE]
    kinds = {doc["kind"] for _, doc in MANIFESTS}
    assert {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "Job"} <= kinds


# -- every paimon-meta invocation, with the settings it gets ---------------------------------------------


def _check_env_names(where: str, env: dict[str, str]) -> None:
    unknown = sorted(k for k in env if k.startswith("PAIMON_META_") and k not in KNOWN_ENV)
    assert not unknown, f"{where}: variables the code does not read: {unknown}"


def _pod_files(spec: dict[str, Any], container: dict[str, Any], tmp: Path) -> dict[str, Path]:
    """Each file the container sees under its mounts (from a ConfigMap's data, or a Secret's keys),
    written under ``tmp``: ``{path in the pod: local copy}``."""
    config_maps = {d["metadata"]["name"]: d["data"] for d in _kind("ConfigMap")}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    out: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]  # a mount names a volume of the pod
        if "configMap" in volume:
            data = config_maps[volume["configMap"]["name"]]
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            contents = {i["path"]: data[i["key"]] for i in items}
        elif "secret" in volume:
            # The Secret is made outside (kustomization.yaml says how): its keys hold a URL or options.
            items = volume["secret"]["items"]
            sample = {"metastore-url": "postgresql+psycopg://u:p@db:5432/meta", "storage-options": "a=b\n"}
            contents = {i["path"]: sample[i["key"]] for i in items}
        else:
            continue
        for name, text in contents.items():
            local = tmp / mount["name"] / name
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text)
            out[f"{mount['mountPath'].rstrip('/')}/{name}"] = local
    return out


def _containers() -> Iterator[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    for name, doc in MANIFESTS:
        template = doc.get("spec", {}).get("template")
        if template is None:
            continue
        for container in template["spec"]["containers"]:
            if container["image"] == IMAGE:
                yield name, doc, template["spec"], container


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    config_maps = {d["metadata"]["name"]: d["data"] for d in _kind("ConfigMap")}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]])
    env.update({e["name"]: e["value"] for e in container.get("env", [])})
    return env


def _parse_in_pod(where: str, spec: dict[str, Any], container: dict[str, Any], tmp: Path) -> Any:
    env = _container_env(container)
    _check_env_names(where, env)
    files = _pod_files(spec, container, tmp)
    for key, value in env.items():
        if key == ENV_CONFIG or key.endswith("_FILE"):
            assert value in files, f"{where}: ${key}={value} is not a file the pod mounts ({sorted(files)})"
            env[key] = str(files[value])
    assert "command" not in container, f"{where}: the image's entrypoint is paimon-meta"
    return _parse(where, container["args"], {**env, ENV_HOME: str(tmp)})


def test_kubernetes_invocations_parse(tmp_path: Path) -> None:
    names = []
    for i, (where, _doc, spec, container) in enumerate(_containers()):
        args = _parse_in_pod(where, spec, container, tmp_path / str(i))
        names.append((args.command, args.metastore is not None))
    # The migration Job and the service, both reaching the metastore through the Secret.
    assert sorted(names) == [("db", True), ("serve", True)]


def test_the_service_pod(tmp_path: Path) -> None:
    ((where, deployment, spec, container),) = [c for c in _containers() if c[1]["kind"] == "Deployment"]
    args = _parse_in_pod(where, spec, container, tmp_path)
    assert args.command == "serve" and args.log_format == "json"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == args.port
    assert container["livenessProbe"]["httpGet"]["path"] == paths.HEALTHZ
    assert container["readinessProbe"]["httpGet"]["path"] == paths.READYZ
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert spec["terminationGracePeriodSeconds"] > pause + args.drain_seconds
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (service,) = _kind("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert all(
        p["targetPort"] in ports or p["targetPort"] in ports.values() for p in service["spec"]["ports"]
    )
    (pdb,) = _kind("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


# -- docker-compose.yml ---------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m)", text)
    assert match, text
    return int(match[1]) * {"ms": 0.001, "s": 1, "m": 60}[match[2]]


def test_compose_invocations(tmp_path: Path) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    assert compose["x-paimon-meta"]["build"]["dockerfile"] == str(CONTAINERFILE.relative_to(REPO))
    ran = {}
    for name, service in compose["services"].items():
        if service.get("image") != "paimon-meta:local" or "entrypoint" in service:
            continue
        env = {k: str(v) for k, v in service.get("environment", {}).items()}
        _check_env_names(f"compose {name}", env)
        args = _parse(f"compose {name}", service["command"], {**env, ENV_HOME: str(tmp_path)})
        ran[name] = args
    assert set(ran) == {"demo", "migrate", "catalog", "metrics"}
    assert (ran["migrate"].command, ran["migrate"].db_command) == ("db", "upgrade")
    catalog = compose["services"]["catalog"]
    serve = ran["catalog"]
    assert _seconds(catalog["stop_grace_period"]) > serve.drain_seconds
    assert catalog["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert [f"{serve.port}:{serve.port}"] == catalog["ports"]
    check = " ".join(catalog["healthcheck"]["test"])
    assert re.search(rf"http://127\.0\.0\.1:{serve.port}(/\w+)", check)[1] == paths.READYZ  # type: ignore[index]
    assert [f"{ran['metrics'].serve}:{ran['metrics'].serve}"] == compose["services"]["metrics"]["ports"]


# -- the Containerfile ----------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_containerfile(tmp_path: Path) -> None:
    steps = _instructions()
    final = steps[max(i for i, (w, _) in enumerate(steps) if w == "FROM") :]
    env: dict[str, str] = {}
    for word, rest in final:
        if word == "ENV":
            env.update(dict(part.split("=", 1) for part in shlex.split(rest)))
    _check_env_names("Containerfile", env)
    values = dict(final)
    entrypoint, cmd = json.loads(values["ENTRYPOINT"]), json.loads(values["CMD"])
    assert entrypoint[-1] == "paimon-meta"
    args = _parse("Containerfile", cmd, {**env, ENV_HOME: str(tmp_path)})
    assert args.command == "serve" and args.host == "0.0.0.0"
    assert int(values["EXPOSE"]) == args.port
    user = values["USER"].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), "a numeric non-root user"
    check = values["HEALTHCHECK"]
    assert f"/{paths.HEALTHZ.lstrip('/')}'" in check and "PAIMON_META_SERVE_PORT" in check
    # The console's assets are built (node stage) and copied where the package serves them from; every
    # asset the templates load is among them.
    assert any(w == "FROM" and " AS console" in r for w, r in steps)
    copied = " ".join(r for w, r in steps if w == "RUN")
    templates = " ".join(
        p.read_text() for p in (Path(REPO) / "paimon_meta/service/console/templates").glob("*.html")
    )
    for asset in set(re.findall(r"static/vendor/([\w.-]+\.(?:js|css))", templates)):
        assert f"/{asset}" in copied, asset
    vendor = "paimon_meta/service/console/static/vendor"
    assert ("COPY", f"--from=console /console/vendor ./{vendor}") in final
