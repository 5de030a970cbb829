"""Every command shown in README.md and docs/tutorials/ runs, and prints what the page shows.

A page marks its code blocks with an HTML comment on the line before the fence (invisible once rendered):

- ``<!-- run -->``: run the ```bash block with bash; it must exit 0 (``<!-- run: exit=N -->``: exit N).
  ``<!-- run: e2e -->`` needs a cluster (below). ``<!-- run: ci -->`` is the README's test command: not run here
  (it is what runs this test), but it must be ``.ci/run``'s command, character for character.
- ``<!-- output -->``: the next block is what the run block before it prints on standard output. ``...`` alone
  on a line stands for any number of lines, and within a line for any text.
- ``<!-- file: PATH -->``: the next block is written to PATH before the blocks after it run.
- ``<!-- cluster: objects=PATH kube-scheduler -->`` (once per page): what the page's cluster holds before its
  first e2e block: the objects of PATH (with the namespaces they name) and, with ``kube-scheduler``, the real
  kube-scheduler running.

Every ```bash block of these pages must be marked ``run``, so no command can be shown without being run.

A page runs in a temporary directory holding a copy of the repository's sources, examples and deploy/, with
``python`` and ``kubesched`` on PATH from a fresh virtual environment of its own that sees this interpreter's
packages: ``pip install`` in a page installs there, never into the environment running the tests. The e2e
blocks get ``KUBECONFIG`` for a throwaway kube-apiserver (``KUBEBUILDER_ASSETS``) and need ``kubectl``; without
either the page stops before its first e2e block and the test is skipped, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorials").glob("*.md"))]
COPIED = ("pyproject.toml", "README.md", "src", "examples", "deploy")
BLOCK_TIMEOUT_SECONDS = 300

_MARKER = re.compile(r"^<!--\s*(run|output|file|cluster)(?::\s*(.*?))?\s*-->\s*$")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")
_COMMAND_LANGUAGES = {"bash", "sh", "shell", "console"}


@dataclass
class Block:
    kind: str  # run, output, file, or "" for an unmarked block
    option: str
    language: str
    text: str
    line: int


@dataclass
class Page:
    path: Path
    blocks: list[Block]
    cluster: dict[str, str] = field(default_factory=dict)

    @property
    def needs_cluster(self) -> bool:
        return any(block.kind == "run" and "e2e" in block.option.split() for block in self.blocks)


def parse(path: Path) -> Page:
    """The marked blocks of a Markdown page, in order; a marker must be followed by a fence (blank lines between
    are allowed)."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    cluster: dict[str, str] = {}
    pending: tuple[str, str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _MARKER.match(line.strip())
        fence = _FENCE.match(line)
        if marker is not None:
            kind, option = marker.group(1), marker.group(2) or ""
            if kind == "cluster":
                for word in option.split():
                    key, _, value = word.partition("=")
                    cluster[key] = value
            else:
                assert pending is None, f"{path.name}:{i + 1}: two markers for one block"
                pending = (kind, option, i + 1)
        elif fence is not None:
            ticks, language = fence.group(1), fence.group(2)
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
            assert end is not None, f"{path.name}:{i + 1}: unclosed code block"
            kind, option, _ = pending or ("", "", 0)
            blocks.append(Block(kind, option, language, "\n".join(lines[i + 1 : end]) + "\n", i + 1))
            pending = None
            i = end
        elif line.strip() and pending is not None:
            raise AssertionError(f"{path.name}:{pending[2]}: a {pending[0]} marker must be followed by a code block")
        i += 1
    assert pending is None, f"{path.name}:{pending[2]}: a marker at the end of the page"
    return Page(path, blocks, cluster)


def matches(expected: str, actual: str) -> bool:
    """``actual`` as ``expected`` shows it: trailing spaces ignored, ``...`` for any lines or any text in a line."""
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]

    def line_matches(pattern: str, text: str) -> bool:
        return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("...")), text) is not None

    def from_(w: int, g: int) -> bool:
        if w == len(want):
            return g == len(got)
        if want[w] == "...":
            return any(from_(w + 1, k) for k in range(g, len(got) + 1))
        return g < len(got) and line_matches(want[w], got[g]) and from_(w + 1, g + 1)

    return from_(0, 0)


def ci_command() -> str:
    """The command ``.ci/run`` runs: its last line."""
    return (ROOT / ".ci" / "run").read_text().rstrip("\n").splitlines()[-1]


# ---------------------------------------------------------------------------------------------- environment


def _copy_repository(destination: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.jsonl", "*.head")
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            shutil.copy(source, destination / name)


def _reader_environment(workdir: Path) -> dict[str, str]:
    """A fresh virtual environment that sees this interpreter's packages (after its own), with ``python`` and
    ``kubesched`` first on PATH: what a reader who installed kubesched has, without touching the test's own."""
    venv = workdir / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [own] = list(venv.glob("lib/python*/site-packages"))
    outer = [*site.getsitepackages(), site.getusersitepackages()]
    lines = [f"import site; site.addsitedir({directory!r})" for directory in outer if Path(directory).is_dir()]
    (own / "kubesched-tests-outer.pth").write_text("\n".join(lines) + "\n")
    shims = workdir / ".shims"
    shims.mkdir()
    (shims / "kubesched").write_text(f'#!/bin/sh\nexec "{venv}/bin/python" -m kubesched.cli.main "$@"\n')
    (shims / "kubesched").chmod(0o755)
    # The reader's own settings stay (a pip index, certificates); what would send Python or pip elsewhere goes.
    away = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PIP_PREFIX", "PIP_TARGET", "PIP_USER"}
    env = {key: value for key, value in os.environ.items() if key not in away}
    env.update(
        {
            "PATH": os.pathsep.join([str(venv / "bin"), str(shims), os.environ.get("PATH", "")]),
            "VIRTUAL_ENV": str(venv),
            "HOME": str(workdir / ".home"),
            "NO_COLOR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
    )
    (workdir / ".home").mkdir()
    return env


class Cluster:
    """A throwaway kube-apiserver for a page's e2e blocks, with what the page's ``cluster`` marker asks for."""

    def __init__(self, page: Page, workdir: Path, env: dict[str, str], stack: ExitStack, groups: list[int]) -> None:
        assets = os.environ.get("KUBEBUILDER_ASSETS")
        if not assets:
            pytest.skip(f"{page.path.name}: the rest of the page needs a cluster: KUBEBUILDER_ASSETS is not set")
        if shutil.which("kubectl") is None:
            pytest.skip(f"{page.path.name}: the rest of the page needs kubectl, which is not installed")
        from kubesched.harness.envtest import ControlPlane, assets_directory

        directory = assets_directory()
        assert directory is not None, f"KUBEBUILDER_ASSETS={assets} holds no kube-apiserver and etcd"
        plane = stack.enter_context(ControlPlane(directory, workdir / ".control-plane"))
        stack.callback(_kill_groups, groups)  # what the page started in the background ends before the cluster
        kubeconfig = plane.write_kubeconfig(workdir / ".kube" / "config")
        env["KUBECONFIG"] = str(kubeconfig)
        env["PATH"] = os.pathsep.join([env["PATH"], str(directory)])
        objects = page.cluster.get("objects")
        if objects:
            documents = yaml.safe_load((workdir / objects).read_text())
            items = documents.get("items", [documents]) if isinstance(documents, dict) else documents
            namespaces = sorted({item["metadata"].get("namespace", "default") for item in items} - {"default"})
            for namespace in namespaces:
                _kubectl(env, workdir, "create", "namespace", namespace)
            _kubectl(env, workdir, "apply", "-f", objects)
        if "kube-scheduler" in page.cluster:
            log = (workdir / ".kube-scheduler.log").open("wb")
            stack.callback(log.close)
            command = [str(directory / "kube-scheduler"), f"--kubeconfig={kubeconfig}", "--secure-port=0"]
            process = subprocess.Popen([*command, "--leader-elect=false"], stdout=log, stderr=log, env=env)
            stack.callback(_stop, process)


def _kubectl(env: dict[str, str], workdir: Path, *arguments: str) -> None:
    done = subprocess.run(["kubectl", *arguments], cwd=workdir, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(arguments)}: {done.stderr}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _kill_groups(groups: list[int]) -> None:
    """End what a page left running in the background (``kubesched run &``), each block being a group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for group in groups:
            try:
                os.killpg(group, sig)
                alive.append(group)
            except ProcessLookupError:
                pass
        if not alive:
            return
        time.sleep(2)


# ---------------------------------------------------------------------------------------------- the tests


def _page_params() -> Iterator[object]:
    for path in PAGES:
        page = parse(path)
        marks = [pytest.mark.e2e] if page.needs_cluster else []
        yield pytest.param(path, marks=marks, id=path.relative_to(ROOT).as_posix())


@pytest.mark.parametrize("path", list(_page_params()))
def test_every_command_of_the_page_runs_and_prints_what_it_shows(path: Path, tmp_path: Path) -> None:
    page = parse(path)
    workdir = tmp_path / "repository"
    workdir.mkdir()
    _copy_repository(workdir)
    env = _reader_environment(workdir)
    groups: list[int] = []
    ran = 0
    with ExitStack() as stack:
        stack.callback(_kill_groups, groups)
        cluster: Cluster | None = None
        last: tuple[Block, str] | None = None
        for block in page.blocks:
            where = f"{path.name}:{block.line}"
            if block.kind == "file":
                target = workdir / block.option
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
            elif block.kind == "output":
                assert last is not None, f"{where}: an output block with no run block before it"
                command, printed = last
                assert matches(block.text, printed), (
                    f"{where}: the output of the block at line {command.line} differs from the page\n"
                    f"--- page\n{block.text}--- printed\n{printed}"
                )
                last = None
            elif block.kind == "run":
                options = block.option.split()
                if "ci" in options:
                    continue
                if "e2e" in options and cluster is None:
                    cluster = Cluster(page, workdir, env, stack, groups)
                expected_code = next((int(o.split("=", 1)[1]) for o in options if o.startswith("exit=")), 0)
                process = subprocess.Popen(
                    ["bash", "-c", "set -eo pipefail\n" + block.text],
                    cwd=workdir,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
                groups.append(process.pid)
                try:
                    stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    stdout, stderr = process.communicate()
                    pytest.fail(f"{where}: still running after {BLOCK_TIMEOUT_SECONDS} s\n{stdout}\n{stderr}")
                assert process.returncode == expected_code, (
                    f"{where}: exit code {process.returncode}, the page expects {expected_code}\n"
                    f"--- block\n{block.text}--- stdout\n{stdout}--- stderr\n{stderr}"
                )
                last = (block, stdout)
                ran += 1
    assert ran > 0, f"{path.name}: no command ran"


@pytest.mark.parametrize("path", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_command_block_is_marked_to_run(path: Path) -> None:
    unmarked = [
        block.line for block in parse(path).blocks if block.language in _COMMAND_LANGUAGES and block.kind != "run"
    ]
    assert unmarked == [], f"{path.name}: command blocks at lines {unmarked} are not marked <!-- run -->"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    [block] = [b for b in parse(ROOT / "README.md").blocks if b.kind == "run" and "ci" in b.option.split()]
    commands = [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands == [ci_command()]


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        pytest.param("a\nb\n", "a  \nb\n\n", True, id="trailing-spaces-and-lines-ignored"),
        pytest.param("a\n...\nd\n", "a\nb\nc\nd\n", True, id="a-dots-line-stands-for-lines"),
        pytest.param("a\n...\nd\n", "a\nd\n", True, id="a-dots-line-stands-for-no-line"),
        pytest.param("key ... (record 7)\n", "key 4a54e5 (record 7)\n", True, id="dots-within-a-line"),
        pytest.param("a\nb\n", "a\nc\n", False, id="a-changed-line-differs"),
        pytest.param("a\n", "a\nb\n", False, id="an-extra-line-differs"),
        pytest.param("x ... y\n", "x z\n", False, id="dots-keep-the-text-around-them"),
    ],
)
def test_output_matching(expected: str, actual: str, same: bool) -> None:
    assert matches(expected, actual) is same


def test_a_marker_must_be_followed_by_a_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- run -->\nsome prose\n```bash\ntrue\n```\n")
    with pytest.raises(AssertionError, match="must be followed by a code block"):
        parse(page)
