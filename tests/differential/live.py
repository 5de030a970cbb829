"""A scenario's pending pods scheduled by the real kube-scheduler against a real kube-apiserver (envtest's).

Called by ``tests/e2e/test_kube_oracle_artifacts.py``, which checks on such a run what kube-oracle cannot judge
(:mod:`.oracle_artifacts`, docs/reference/compatibility.md). :func:`run_live` starts envtest's kube-apiserver,
creates the scenario through the API (nodes and their status; running, terminating and finished pods;
PodDisruptionBudgets and their status; the pending pods with their nominations), starts envtest's kube-scheduler
with the scenario's configuration, and waits until no pod's answer has changed for a while. A pod's answer is
its node, or the note of its latest FailedScheduling event, in kube-oracle's form.

There is no kubelet: a pod deleted while the scheduler runs (a preemption's victim) is confirmed gone by a
stand-in shortly after, as a kubelet would. kube-scheduler's informer lists the pending pods in the API
server's key order (namespace, then name), the order in which pods of equal priority leave its queue, so a
scenario meant to be compared with kube-oracle and kubesched names its pods in the order of its file.
"""

from __future__ import annotations

import copy
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from kubesched.harness.envtest import ControlPlane

from .generator import Manifest, as_submitted

# kube-scheduler's longest pod backoff is 10 s: an answer unchanged for longer than that is final.
SETTLE_SECONDS = 12.0
LIMIT_SECONDS = 150.0
POLL_SECONDS = 1.0
KUBELET_POLL_SECONDS = 0.05
MERGE_PATCH = "application/merge-patch+json"
VERBOSITY = 2
# Attempts are not compared (compare.py compares them only where the other side needed at most one).
UNCOUNTED_ATTEMPTS = 99


def collection(obj: Manifest) -> str:
    """The API path objects of ``obj``'s kind are created at."""
    namespace = obj["metadata"].get("namespace", "default")
    return {
        "Namespace": "/api/v1/namespaces",
        "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
        "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses",
        "Node": "/api/v1/nodes",
        "Pod": f"/api/v1/namespaces/{namespace}/pods",
        "PodDisruptionBudget": f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
    }[obj["kind"]]


def _call(plane: ControlPlane, method: str, path: str, body: Any = None, **options: Any) -> Any:
    status, answer = plane.request(method, path, body, **options)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {answer}")
    return answer


def _key(obj: Manifest) -> str:
    return f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"


def create_cluster(plane: ControlPlane, objects: Sequence[Manifest]) -> None:
    """Every object through the API, in order, with the status the manifest gives it."""
    for obj in objects:
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == "default":
            continue
        path = collection(obj)
        _call(plane, "POST", path, as_submitted(obj))
        status = obj.get("status")
        name = obj["metadata"]["name"]
        if status and obj["kind"] in ("Node", "Pod", "PodDisruptionBudget"):
            _call(plane, "PATCH", f"{path}/{name}/status", {"status": status}, content_type=MERGE_PATCH)
        if obj["kind"] == "Pod" and obj["metadata"].get("deletionTimestamp"):
            # Bound, and with no kubelet to confirm its end, a deleted pod stays terminating.
            _call(plane, "DELETE", f"{path}/{name}")


def _answers(plane: ControlPlane, pending: Sequence[Manifest]) -> list[dict[str, Any]]:
    """The pending pods' answers, in kube-oracle's form and the order of ``pending``."""
    namespaces = sorted({pod["metadata"].get("namespace", "default") for pod in pending})
    live: dict[str, Manifest] = {}
    failures: dict[str, tuple[str, str]] = {}  # pod -> (when, note) of its latest FailedScheduling event
    for namespace in namespaces:
        for pod in _call(plane, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]:
            live[_key(pod)] = pod
        for event in _call(plane, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]:
            if event.get("reason") != "FailedScheduling":
                continue
            when = (event.get("series") or {}).get("lastObservedTime") or event.get("eventTime") or ""
            key = f"{event['regarding']['namespace']}/{event['regarding']['name']}"
            if key not in failures or when >= failures[key][0]:
                failures[key] = (when, event.get("note", ""))
    answers = []
    for pod in pending:
        key = _key(pod)
        spec = live[key]["spec"] if key in live else {}
        node = spec.get("nodeName")
        gates = [gate["name"] for gate in spec.get("schedulingGates") or ()]
        message = "" if node else failures.get(key, ("", ""))[1]
        if gates:
            # kube-scheduler records nothing for a gated pod; kube-oracle words it as its PreEnqueue message.
            message = f"waiting for scheduling gates: [{' '.join(gates)}]"
        answers.append(
            {
                "namespace": key.split("/")[0],
                "name": key.split("/")[1],
                "result": "Scheduled" if node else "Unschedulable",
                "node": node,
                "message": message,
                "attempts": 0 if gates else UNCOUNTED_ATTEMPTS,
            }
        )
    return answers


@contextmanager
def _kubelet(plane: ControlPlane, terminating: set[str]) -> Iterator[None]:
    """Stands in for the kubelets: a pod deleted while the scheduler runs is gone soon after; the pods the
    scenario has terminating stay so."""
    stop = threading.Event()

    def confirm() -> None:
        while not stop.wait(KUBELET_POLL_SECONDS):
            for pod in _call(plane, "GET", "/api/v1/pods")["items"]:
                if pod["metadata"].get("deletionTimestamp") and _key(pod) not in terminating:
                    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
                    plane.request("DELETE", path, {"gracePeriodSeconds": 0})

    thread = threading.Thread(target=confirm, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def _scheduler(assets: Path, plane: ControlPlane, config: Manifest, workdir: Path) -> Iterator[None]:
    """envtest's kube-scheduler with ``config`` (its log in ``workdir/kube-scheduler.log``)."""
    kubeconfig = plane.write_kubeconfig(workdir / "kubeconfig")
    live_config = copy.deepcopy(config)
    live_config["clientConnection"] = {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000}
    live_config["leaderElection"] = {"leaderElect": False}
    config_path = workdir / "scheduler-config.yaml"
    config_path.write_text(yaml.safe_dump(live_config, sort_keys=False))
    command = [str(assets / "kube-scheduler"), "--config", str(config_path), "--secure-port=0", f"-v={VERBOSITY}"]
    with (workdir / "kube-scheduler.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_live(objects: Sequence[Manifest], config: Manifest, assets: Path, workdir: Path) -> list[dict[str, Any]]:
    """The pending pods' answers from envtest's kube-scheduler on ``objects`` (module doc)."""
    pending = [obj for obj in objects if obj["kind"] == "Pod" and not obj["spec"].get("nodeName")]
    terminating = {_key(obj) for obj in objects if obj["kind"] == "Pod" and obj["metadata"].get("deletionTimestamp")}
    with ControlPlane(assets, workdir) as plane:
        create_cluster(plane, objects)
        with _kubelet(plane, terminating), _scheduler(assets, plane, config, workdir):
            started = last_change = time.monotonic()
            answers = _answers(plane, pending)
            while time.monotonic() - last_change < SETTLE_SECONDS and time.monotonic() - started < LIMIT_SECONDS:
                time.sleep(POLL_SECONDS)
                now = _answers(plane, pending)
                if now != answers:
                    answers, last_change = now, time.monotonic()
            return answers
