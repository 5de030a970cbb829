"""Out-of-tree plugins through the ``kubesched.plugins`` entry-point group, as a plugin author ships them.

Two small distributions are built from a ``pyproject.toml`` each and installed by pip into a directory of
their own (``pip install --target``, never into the shared environment); then the ``kubesched`` command runs
in a subprocess with that directory on ``PYTHONPATH``, after this checkout's ``src``. One distribution is good:
an entry point naming a Filter plugin class (``ForbiddenNodes``, keeps pods off nodes labelled
``forbidden=true``) and one naming a function returning registrations (``BluePoolOnly``). The other is broken
in every way an entry point can be: each must cost one warning line naming it, never a traceback.

The distributions are built by a PEP 517 backend of a few lines that ships inside them (``backend-path``), not
by setuptools: setuptools before 70.1 builds wheels only with the ``wheel`` package, which this environment
does not have (``pip install --no-build-isolation`` then fails with ``invalid command 'bdist_wheel'``), and
fetching it would make the test depend on a package index. pip still does the install, so kubesched meets an
ordinarily installed distribution: ``*.dist-info`` with ``entry_points.txt`` on the path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# The build backend both distributions carry: reads the name, version, entry points and packages from
# pyproject.toml and writes a pure-Python wheel.
BACKEND = """
import base64, hashlib, pathlib, tomllib, zipfile


def _record(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())
    name, version = project["project"]["name"].replace("-", "_"), project["project"]["version"]
    files = {}
    for package in project["tool"]["tiny-backend"]["packages"]:
        for path in sorted(pathlib.Path(package).rglob("*.py")):
            files[path.as_posix()] = path.read_bytes()
    info = f"{name}-{version}.dist-info"
    groups = project["project"].get("entry-points", {})
    entry_points = "".join(
        f"[{group}]\\n" + "".join(f"{key} = {value}\\n" for key, value in points.items()) + "\\n"
        for group, points in groups.items()
    )
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n".encode()
    wheel_info = "Wheel-Version: 1.0\\nGenerator: tiny-backend\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{info}/WHEEL"] = wheel_info.encode()
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = [_record(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel
"""

PYPROJECT = """[build-system]
requires = []
build-backend = "tiny_backend"
backend-path = ["."]

[project]
name = "{name}"
version = "0.1"

[project.entry-points."kubesched.plugins"]
{entry_points}

[tool.tiny-backend]
packages = {packages}
"""

FILTERS = '''
"""A Filter plugin published as a class: its name attribute is its plugin name."""
from kubesched.framework import Code, Status


class ForbiddenNodes:
    """Keeps pods off nodes labelled forbidden=true."""

    name = "ForbiddenNodes"

    def __init__(self, args, handle):
        pass

    def filter(self, state, pod, node_info):
        if node_info.labels.get("forbidden") == "true":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node is forbidden")
        return None
'''

POOLS = '''
"""A Filter plugin published through a function returning its registration."""
from kubesched.framework import Code, PluginRegistration, Status


class BluePoolOnly:
    """Admits only nodes of pool blue."""

    @property
    def name(self):
        return "BluePoolOnly"

    def __init__(self, args, handle):
        pass

    def filter(self, state, pod, node_info):
        if node_info.labels.get("pool") != "blue":
            return Status(Code.UNSCHEDULABLE, "node is not in pool blue")
        return None


def registrations():
    return [PluginRegistration.of("BluePoolOnly", BluePoolOnly)]
'''

BROKEN = """
NOT_A_PLUGIN = {"name": "NotAPlugin"}


class Nameless:
    def filter(self, state, pod, node_info):
        return None


def explode():
    raise RuntimeError("registry service unreachable\\nsee the logs")


def junk():
    return "ForbiddenNodes"
"""

# entry point name -> (value, what its warning line must say after naming it)
BROKEN_ENTRY_POINTS = {
    "missing-module": ("kubesched_no_such_module:Thing", "cannot import it: ModuleNotFoundError: No module named"),
    "syntax-error": ("broken_syntax:Thing", "cannot import it: SyntaxError:"),
    "missing-attr": ("broken_plugins:Gone", "cannot import it: AttributeError:"),
    "neither": ("broken_plugins:NOT_A_PLUGIN", "it is dict, not a plugin class with a string `name`"),
    "nameless": ("broken_plugins:Nameless", "class Nameless has no string `name` attribute"),
    "raises": ("broken_plugins:explode", "calling it raised RuntimeError: registry service unreachable see the logs"),
    "returns-junk": ("broken_plugins:junk", "it returned str, not plugin registrations"),
}

MANIFESTS = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: big, labels: {forbidden: "true", pool: blue}}
  status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: small-green, labels: {pool: green}}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
- apiVersion: v1
  kind: Node
  metadata: {name: small-blue, labels: {pool: blue}}
  status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: default}
  spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
"""

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      enabled: [{name: ForbiddenNodes}, {name: BluePoolOnly}]
"""


def write_distribution(root: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    root.mkdir()
    (root / "tiny_backend.py").write_text(BACKEND)
    points = "\n".join(f"{key} = {json.dumps(value)}" for key, value in entry_points.items())
    packages = sorted({module.split("/")[0] for module in modules})
    (root / "pyproject.toml").write_text(
        PYPROJECT.format(name=name, entry_points=points, packages=json.dumps(packages))
    )
    for module, text in modules.items():
        path = root / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both distributions, installed by pip into a directory of their own."""
    root = tmp_path_factory.mktemp("plugins")
    good = write_distribution(
        root / "kubesched-forbidden",
        "kubesched-forbidden",
        {"forbidden-nodes": "forbidden_nodes.filters:ForbiddenNodes", "pools": "forbidden_nodes.pools:registrations"},
        {"forbidden_nodes/__init__.py": "", "forbidden_nodes/filters.py": FILTERS, "forbidden_nodes/pools.py": POOLS},
    )
    broken = write_distribution(
        root / "kubesched-broken",
        "kubesched-broken",
        {name: value for name, (value, _) in BROKEN_ENTRY_POINTS.items()},
        {
            "broken_plugins/__init__.py": BROKEN,
            "broken_syntax/__init__.py": "def (:\n",
        },
    )
    target = root / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run(
        [*install, "--no-cache-dir", "--disable-pip-version-check", "--target", str(target), str(good), str(broken)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "kubesched_forbidden-0.1.dist-info" / "entry_points.txt").is_file()
    return target


def kubesched(site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``kubesched`` console script (``python -m kubesched.cli.main`` where it is not installed), with this
    checkout's ``src`` first on the path and the plugins' directory after it."""
    script = shutil.which("kubesched")
    command = [script] if script is not None else [sys.executable, "-m", "kubesched.cli.main"]
    path = [str(SRC)] + ([str(site)] if site is not None else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300, check=False)


def placements(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return {pod["name"]: pod for pod in json.loads(done.stdout)["pods"]}


def test_installed_plugins_are_listed_and_change_the_placement(site: Path, tmp_path: Path) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(MANIFESTS)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)

    listed = kubesched(site, "plugins", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    plugins = {entry["name"]: entry for entry in json.loads(listed.stdout)}
    assert plugins["ForbiddenNodes"] == {"name": "ForbiddenNodes", "status": "built", "extensionPoints": ["filter"]}
    assert plugins["BluePoolOnly"]["extensionPoints"] == ["filter"]
    assert "NodeResourcesFit" in plugins, "the in-tree plugins are still there"
    table = kubesched(site, "plugins")
    assert any(line.split()[:2] == ["ForbiddenNodes", "built"] for line in table.stdout.splitlines())

    # Without the plugins in the profile, the big node wins on free resources.
    assert placements(kubesched(site, "simulate", "-f", str(manifests), "-o", "json"))["web"]["node"] == "big"
    web = placements(kubesched(site, "simulate", "-f", str(manifests), "--config", str(config), "-o", "json"))["web"]
    assert web["node"] == "small-blue"
    assert web["filter"]["big"] == {
        "plugin": "ForbiddenNodes",
        "code": "UnschedulableAndUnresolvable",
        "reasons": ["node is forbidden"],
    }
    assert web["filter"]["small-green"]["plugin"] == "BluePoolOnly"

    # The same configuration without the distribution on the path: the plugins are unknown to the config.
    missing = kubesched(None, "simulate", "-f", str(manifests), "--config", str(config))
    assert missing.returncode == 1 and "ForbiddenNodes" in missing.stderr


def test_each_broken_entry_point_is_one_warning_naming_it(site: Path) -> None:
    done = kubesched(site, "plugins")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(BROKEN_ENTRY_POINTS), done.stderr
    for name, (value, says) in BROKEN_ENTRY_POINTS.items():
        [line] = [line for line in lines if f"'{name}' ({value})" in line]
        severity, _, message = line.partition("] ")
        assert severity.startswith("W"), line  # klog's layout: W<date> <time> <logger>] <message>
        assert message.startswith(f"skipping plugin entry point '{name}' ({value}): {says}"), line
    # The good distribution's plugins still joined, and so did every in-tree one.
    listed = {line.split()[0] for line in done.stdout.splitlines()}
    assert {"ForbiddenNodes", "BluePoolOnly", "NodeResourcesFit"} <= listed
