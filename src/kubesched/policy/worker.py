"""The embedded Rego engine as an asynchronous PolicyClient: regorus in a child process, with a real time limit.

Who calls it: the scheduler builds one :class:`EmbeddedPolicyClient` per distinct embedded
:class:`~kubesched.policyapi.contract.PolicyEngineSpec` and hands it to the SecurityAudit plugins through the Handle;
the scheduling cycle awaits its decisions between Filter batches. ``kubesched policy test``
(:mod:`kubesched.policy.rego_tests`) starts its child processes with this module's start method and pipe handling.
Why a process, how workers start, the time limit and reloads: docs/explanation/policy-decisions.md#the-embedded-engine.

One thread per client does every blocking thing (sending, waiting on the pipe and the process sentinel with the
time left, killing and restarting the worker); coroutines hand it jobs in order. Requests are a JSON header line
and the input as JSON, given to regorus as it is; decision answers are JSON (``{"revision", "decision"}`` or
``{"revision", "decisions"}``, each decision ``[allowed, reasons, decision_id, pending, undefined]``, or
``{"error"}``); start-up and reload messages are pickled, as YAML data may hold values JSON cannot. A program
started from a script must guard its entry point with ``if __name__ == "__main__"``: the fork server imports it.

``refresh``, ``decide`` and ``decide_batch`` first stat the policy files (in the caller, no round trip) and have
the worker reload a change before going on, so the first decision after a change is made with the new policy
(docs/explanation/policy-freshness.md); ``revision`` answers without I/O.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, cast

from kubesched.clock import Clock
from kubesched.policy.contract import batch_input
from kubesched.policy.embedded import EmbeddedRegoEngine, PolicySources, Stamp, watched_paths
from kubesched.policyapi.contract import ENGINE_EMBEDDED, Decision, InputPaths, PolicyError, undefined_decision

__all__ = ["DEFAULT_STARTUP_TIMEOUT_SECONDS", "START_METHOD", "EmbeddedPolicyClient"]

log = logging.getLogger(__name__)

#: How worker processes are started: a fork of a server with this module preloaded, so a restart is cheap; ``fork``
#: from the scheduler's multi-threaded process would be unsafe.
START_METHOD = "forkserver"
DEFAULT_STARTUP_TIMEOUT_SECONDS = 30.0
# An idle worker asked to exit gets this long before it is killed.
_EXIT_GRACE_SECONDS = 1.0

_DECIDE = b'{"op":"decide"}\n'
_RELOAD = b'{"op":"reload"}\n'
_EXIT = b'{"op":"exit"}\n'

_context_lock = threading.Lock()
_context_ready = False


_Context = multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext


def _context() -> _Context:
    global _context_ready
    context = cast(_Context, multiprocessing.get_context(START_METHOD))
    with _context_lock:
        if not _context_ready and START_METHOD == "forkserver":
            # Takes effect when the fork server starts (by the first worker): every worker then starts as a
            # fork with regorus and the engine already imported. Process-wide, hence once.
            context.set_forkserver_preload([__name__])
        _context_ready = True
    return context


@dataclass(frozen=True, slots=True)
class _WorkerConfig:
    policies: tuple[str, ...]
    data: tuple[str, ...]
    decision_path: str
    cwd: str


# ------------------------------------------------------------------------------------------------ worker side


def _wire(decision: Decision) -> list[Any]:
    return [decision.allowed, list(decision.reasons), decision.decision_id, decision.pending, decision.undefined]


def _answer(engine: EmbeddedRegoEngine, header: Mapping[str, Any], body: bytes) -> dict[str, Any]:
    try:
        if header["op"] == "decide":
            decision = engine.decide(body.decode())
            return {"revision": decision.revision, "decision": _wire(decision)}
        if header["op"] == "batch":
            decisions = engine.decide_batch_document(body.decode(), header["kind"])
            return {"revision": engine.sources.revision, "decisions": {n: _wire(d) for n, d in decisions.items()}}
        return {"error": f"policy worker: unknown request {header['op']!r}"}
    except PolicyError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # a bug, not the policy's fault: report it and keep serving
        return {"error": f"policy worker failed: {type(exc).__name__}: {exc}"}


def _reload(engine: EmbeddedRegoEngine, conn: Connection) -> None:
    def announce(stamp: Stamp) -> None:
        # Sent before compiling, so that a parent that has to kill us knows which change never finished.
        conn.send_bytes(pickle.dumps(("reloading", stamp)))

    before = engine.sources.revision
    error = ""
    try:
        engine.check_for_changes(announce)
    except Exception as exc:  # a bug: keep serving the engine in force, and say why the files were not loaded
        error = f"policy reload failed: {type(exc).__name__}: {exc}"
    changed = engine.sources.revision != before
    message = (
        "reloaded",
        engine.sources.revision,
        error or engine.last_reload_error,
        engine.failed_stamp,
        engine.sources if changed else None,
        engine.input_paths,
    )
    conn.send_bytes(pickle.dumps(message))


def _serve(
    conn: Connection,
    config: _WorkerConfig,
    sources: PolicySources | None,
    failed_stamp: Stamp | None,
    reload_error: str,
) -> None:
    """The worker process: build the engine, report, then answer requests until told to exit."""
    # Ctrl-C in a terminal reaches the whole process group; the client decides when its worker stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # What the engine would log (reloads) goes to the parent in the answers, and is logged there.
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        os.chdir(config.cwd)
        engine = EmbeddedRegoEngine(config.policies, config.data, decision_path=config.decision_path, sources=sources)
    except PolicyError as exc:
        conn.send_bytes(pickle.dumps(("error", str(exc))))
        return
    except Exception as exc:
        conn.send_bytes(pickle.dumps(("error", f"policy worker could not start: {type(exc).__name__}: {exc}")))
        return
    engine.remember_failed_reload(failed_stamp, reload_error)
    # The sources go back only when read here: a restarted worker was given them.
    ready = ("ready", engine.sources.revision, engine.sources if sources is None else None, engine.input_paths)
    conn.send_bytes(pickle.dumps(ready))
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the client is gone
        head, _, body = message.partition(b"\n")
        header = json.loads(head)
        if header["op"] == "exit":
            return
        if header["op"] == "reload":
            _reload(engine, conn)
            continue
        try:
            reply = _answer(engine, header, body)
        except BaseException as exc:
            # A pyo3 PanicException is a BaseException: the engine may be broken, so report and exit, and the
            # client starts a fresh worker.
            conn.send_bytes(json.dumps({"error": f"policy engine panicked: {exc}", "fatal": True}).encode())
            return
        conn.send_bytes(json.dumps(reply, separators=(",", ":")).encode())


# ------------------------------------------------------------------------------------------------ client side


class _Lost(Exception):
    """The worker exited (or its pipe broke) before it answered."""


class _Late(Exception):
    """The deadline passed before the worker answered."""


class _Worker:
    """One worker process and the client's end of its pipe."""

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.busy = False  # a request is in flight: close() kills the worker to interrupt it
        self._lock = threading.Lock()
        self._disposed = False

    @property
    def pid(self) -> int:
        return self.process.pid or 0

    def exit_code(self, wait: float = 0.0) -> int | None:
        """The exit status, waiting up to ``wait`` seconds for it: a closed pipe can be seen before the fork
        server has reaped the process and reported how it ended."""
        try:
            self.process.join(wait)
            return self.process.exitcode
        except ValueError:
            return None

    def alive(self) -> bool:
        try:
            return self.process.is_alive()
        except ValueError:
            return False

    def receive(self, deadline: float) -> bytes:
        ready = multiprocessing.connection.wait(
            [self.conn, self.process.sentinel], timeout=max(0.0, deadline - time.monotonic())
        )
        if self.conn in ready:
            try:
                return self.conn.recv_bytes()
            except (EOFError, OSError) as exc:
                raise _Lost from exc
        if ready:
            raise _Lost
        raise _Late

    def exchange(self, request: bytes, deadline: float) -> bytes:
        try:
            self.conn.send_bytes(request)
        except OSError as exc:  # BrokenPipeError, ConnectionResetError: it died before reading
            raise _Lost from exc
        return self.receive(deadline)

    def kill(self) -> None:
        with self._lock:
            if not self._disposed:
                self.process.kill()

    def dispose(self, *, graceful: bool) -> None:
        """Stop the process (asking first when ``graceful``), reap it and release its descriptors."""
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
        process = self.process
        if graceful and process.is_alive():
            try:
                self.conn.send_bytes(_EXIT)
                process.join(_EXIT_GRACE_SECONDS)
            except OSError:
                pass
        if process.is_alive():
            process.kill()
        process.join()
        self.conn.close()
        process.close()


@dataclass(slots=True)
class _Job:
    kind: str  # "decide", "batch", "check" or "stop"
    request: bytes = b""
    deadline: float = 0.0
    names: Sequence[str] = ()
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


def _encode(document: Mapping[str, Any]) -> bytes:
    # ensure_ascii and check_circular off: a fifth less time on the event loop for a 650-node batch, and inputs
    # built from manifests are trees.
    try:
        return json.dumps(
            document, separators=(",", ":"), allow_nan=False, ensure_ascii=False, check_circular=False
        ).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        raise PolicyError(f"the policy input cannot be encoded as JSON: {exc}") from exc


def _decision(wire: Sequence[Any], revision: str) -> Decision:
    allowed, reasons, decision_id, pending, undefined = wire
    return Decision(allowed, tuple(reasons), decision_id, pending=pending, undefined=undefined, revision=revision)


class EmbeddedPolicyClient:
    """A :class:`~kubesched.policyapi.contract.PolicyClient` evaluating Rego v1 in a worker process.

    Construction is synchronous and fails with the engine's :class:`PolicyError` when the policy does not
    compile or a file is missing. Close it with :meth:`aclose` (or :meth:`close` on synchronous shutdown
    paths): that stops the worker process and the client's thread.
    """

    def __init__(
        self,
        policies: Sequence[str],
        data: Sequence[str] = (),
        *,
        decision_path: str,
        timeout_seconds: float,
        reload_interval_seconds: float = 5.0,
        clock: Clock,
        startup_timeout_seconds: float = DEFAULT_STARTUP_TIMEOUT_SECONDS,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds}")
        self._config = _WorkerConfig(tuple(policies), tuple(data), decision_path, os.getcwd())
        self._timeout = timeout_seconds
        self._startup_timeout = startup_timeout_seconds
        self._reload_interval = reload_interval_seconds
        self._clock = clock
        # Guards the handover between callers (enqueue, close) and the client thread (worker swaps).
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._closed = False
        self._worker: _Worker | None = None
        self._sources: PolicySources | None = None
        self._failed_stamp: Stamp | None = None
        self._last_reload_error = ""
        self._revision = ""
        # What the policy of a revision reads of its input, as the worker analysed it when it built the engine.
        self._paths: tuple[str, InputPaths] = ("", InputPaths(None))
        self._last_check = clock.now()
        self._check_pending = False
        self._stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        # The files' state as last seen here: taken before the worker reads them, so a change made while it reads
        # differs from it and is reloaded at the next look.
        self._watched: tuple[str, ...] = ()
        self._files_seen = self._files_state()
        self._start_worker()
        self._thread = threading.Thread(target=self._run, name="kubesched-policy-client", daemon=True)
        self._thread.start()

    # ---- PolicyClient

    @property
    def kind(self) -> str:
        return ENGINE_EMBEDDED

    @property
    def decision_path(self) -> str:
        return self._config.decision_path

    @property
    def last_reload_error(self) -> str:
        """Why the files on disk are not the policy in force ("" when they are, as far as last checked)."""
        return self._last_reload_error

    @property
    def worker_pid(self) -> int | None:
        """The worker's process id (for operators and tests); None between a lost worker and its successor."""
        worker = self._worker
        return worker.pid if worker is not None else None

    def revision(self) -> str:
        self._maybe_check()
        return self._revision

    def input_paths(self, revision: str) -> InputPaths | None:
        # Only for the revision analysed: a caller holding an older or newer revision keys on the whole input.
        analysed, paths = self._paths
        return paths if analysed == revision and revision else None

    async def refresh(self) -> str:
        """The revision in force once the files as they are now have been loaded (reloaded first if they changed)."""
        await self._follow_files()
        return self._revision

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        deadline = _monotonic() + self._timeout
        await self._follow_files()
        self._maybe_check()
        job = _Job("decide", _DECIDE + _encode(input_doc), deadline)
        result: Decision = await self._submit(job)
        return result

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        deadline = _monotonic() + self._timeout
        await self._follow_files()
        self._maybe_check()
        names = [target["metadata"]["name"] for target in targets]
        document = batch_input(pod, targets, target_kind=target_kind, operation=operation, time=time)
        header = json.dumps({"op": "batch", "kind": target_kind}).encode() + b"\n"
        job = _Job("batch", header + _encode(document), deadline, names)
        result: dict[str, Decision] = await self._submit(job)
        return result

    async def reload(self) -> str:
        """Check the files now (whatever the interval) and return the revision in force afterwards."""
        self._last_check = self._clock.now()
        self._check_pending = True
        await self._submit(_Job("check"))
        return self._revision

    async def aclose(self) -> None:
        self._begin_close()
        await asyncio.wrap_future(self._stopped)
        self._thread.join()

    def close(self) -> None:
        """Stop the worker and the thread, waiting for them; idempotent."""
        self._begin_close()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # ---- callers' side

    def _files_state(self) -> Hashable:
        """The stat of every watched path (:func:`~kubesched.policy.embedded.watched_paths`, listed when there is no
        list yet), or why they cannot be listed: a change of either is a change to reload."""
        try:
            if not self._watched:
                cwd = self._config.cwd
                self._watched = watched_paths(
                    [os.path.join(cwd, path) for path in self._config.policies],
                    [os.path.join(cwd, path) for path in self._config.data],
                )
            return tuple(_identity(path) for path in self._watched)
        except (PolicyError, OSError) as exc:
            self._watched = ()
            return ("unreadable", str(exc))

    async def _follow_files(self) -> None:
        """Have the worker reload the files first when they changed since last seen here (a stat per watched path)."""
        if self._closed:
            return
        state = self._files_state()
        if state == self._files_seen:
            return
        self._watched = ()  # listed again: the change may have added or removed files
        self._files_seen = self._files_state()
        self._last_check = self._clock.now()
        self._check_pending = True
        await self._submit(_Job("check"))

    def _maybe_check(self) -> None:
        if self._reload_interval <= 0 or self._check_pending or self._closed:
            return
        now = self._clock.now()
        if now - self._last_check < self._reload_interval:
            return
        self._last_check = now
        self._check_pending = True
        try:
            self._enqueue(_Job("check"))
        except PolicyError:
            self._check_pending = False

    def _enqueue(self, job: _Job) -> None:
        with self._lock:
            if self._closed:
                raise PolicyError("the embedded policy client is closed")
            self._jobs.put(job)

    async def _submit(self, job: _Job) -> Any:
        self._enqueue(job)
        return await asyncio.wrap_future(job.future)

    def _begin_close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(_Job("stop"))  # after it, nothing more is enqueued (see _enqueue)
            worker = self._worker
        if worker is not None and worker.busy:
            worker.kill()  # an evaluation in flight would otherwise hold the close up until its deadline

    # ---- the client thread

    def _run(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job.kind == "stop":
                    break
                if not job.future.set_running_or_notify_cancel():
                    continue  # its caller gave up while it was queued
                try:
                    result = self._perform(job)
                except PolicyError as exc:
                    job.future.set_exception(exc)
                except Exception as exc:
                    # Our bug or a garbled answer: callers only ever see PolicyError, and the worker is suspect.
                    log.exception("policy client failed; restarting the policy worker")
                    if self._worker is not None:
                        self._discard(self._worker)
                    job.future.set_exception(PolicyError(f"the policy client failed: {type(exc).__name__}: {exc}"))
                else:
                    job.future.set_result(result)
                # Replacing a lost worker waits until its caller has the error: the time limit is for the call.
                if self._worker is None and not self._closed:
                    try:
                        self._start_worker()
                    except Exception as exc:
                        if not self._closed:
                            log.error("the policy worker could not be restarted (retried at the next call): %s", exc)
        finally:
            with self._lock:
                self._closed = True  # also when this thread dies of a bug: callers get errors, not a hang
                worker, self._worker = self._worker, None
            if worker is not None:
                worker.dispose(graceful=True)
            while True:
                try:
                    left = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if left.kind != "stop" and left.future.set_running_or_notify_cancel():
                    left.future.set_exception(PolicyError("the embedded policy client is closed"))
            self._stopped.set_result(None)

    def _perform(self, job: _Job) -> Any:
        if self._closed:
            raise PolicyError("the embedded policy client is closed")
        if job.kind == "check":
            self._check()
            return None
        if _monotonic() >= job.deadline:
            raise PolicyError(
                f"policy evaluation did not start within {self._timeout:g}s: the policy worker was busy with "
                "earlier requests"
            )
        worker = self._usable_worker()
        reply = self._call(worker, job.request, job.deadline)
        answer = json.loads(reply)
        if "error" in answer:
            if answer.get("fatal"):
                log.error("policy worker %d failed and is restarted: %s", worker.pid, answer["error"])
                self._discard(worker)
            raise PolicyError(answer["error"])
        revision: str = answer["revision"]
        self._revision = revision
        if job.kind == "decide":
            return _decision(answer["decision"], revision)
        decisions = answer["decisions"]
        return {
            name: _decision(decisions[name], revision) if name in decisions else undefined_decision(revision=revision)
            for name in job.names
        }

    def _call(self, worker: _Worker, request: bytes, deadline: float) -> bytes:
        worker.busy = True
        try:
            return worker.exchange(request, deadline)
        except _Late:
            log.error(
                "policy evaluation did not finish within %gs: killing policy worker %d and starting another",
                self._timeout,
                worker.pid,
            )
            self._discard(worker)
            raise PolicyError(
                f"policy evaluation did not finish within {self._timeout:g}s (timeoutSeconds); the evaluation "
                "was stopped and the policy worker restarted"
            ) from None
        except _Lost:
            if self._closed:
                self._discard(worker)
                raise PolicyError("the embedded policy client was closed during the evaluation") from None
            code = worker.exit_code(wait=_EXIT_GRACE_SECONDS)
            log.error("policy worker %d exited during an evaluation (exit code %s): restarting it", worker.pid, code)
            self._discard(worker)
            raise PolicyError(
                f"the policy worker exited during the evaluation (exit code {code}); it is being restarted"
            ) from None
        finally:
            worker.busy = False

    def _usable_worker(self) -> _Worker:
        worker = self._worker
        if worker is not None and worker.alive():
            return worker
        if worker is not None:
            log.error(
                "policy worker %d exited while idle (exit code %s): restarting it", worker.pid, worker.exit_code()
            )
            self._discard(worker)
        self._start_worker()
        assert self._worker is not None
        return self._worker

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            if self._worker is worker:
                self._worker = None
        worker.dispose(graceful=False)

    def _start_worker(self) -> None:
        """Start a worker and wait until it is ready; blocking (constructor or client thread)."""
        started = _monotonic()
        context = _context()
        parent_conn, child_conn = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(child_conn, self._config, self._sources, self._failed_stamp, self._last_reload_error),
            name="kubesched-policy-worker",
            daemon=True,
        )
        try:
            process.start()
        except BaseException as exc:
            parent_conn.close()
            if isinstance(exc, OSError):  # fork failed (EAGAIN, ENOMEM), the fork server could not be started
                raise PolicyError(f"the policy worker could not be started: {exc}") from exc
            raise
        finally:
            child_conn.close()  # the child has its own copy; ours would keep the pipe open after it dies
        worker = _Worker(process, parent_conn)
        try:
            message = pickle.loads(worker.receive(started + self._startup_timeout))
        except _Lost:
            code = worker.exit_code(wait=_EXIT_GRACE_SECONDS)
            worker.dispose(graceful=False)
            raise PolicyError(f"the policy worker exited while starting (exit code {code})") from None
        except _Late:
            worker.dispose(graceful=False)
            raise PolicyError(f"the policy worker did not start within {self._startup_timeout:g}s") from None
        if message[0] == "error":
            worker.dispose(graceful=False)
            raise PolicyError(message[1])
        _, revision, sources, paths = message
        with self._lock:
            closed = self._closed
            if not closed:
                self._worker = worker
        if closed:
            worker.dispose(graceful=True)
            raise PolicyError("the embedded policy client is closed")
        if sources is not None:
            self._sources = sources
        self._paths = (revision, paths)
        self._revision = revision
        log.debug(
            "policy worker %d ready in %.1f ms (revision %s)", worker.pid, (_monotonic() - started) * 1e3, revision
        )

    def _check(self) -> None:
        try:
            self._reload_check()
        finally:
            self._check_pending = False

    def _reload_check(self) -> None:
        try:
            worker = self._usable_worker()
        except PolicyError as exc:
            if not self._closed:
                log.error("policy reload check skipped: %s", exc)
            return
        deadline = _monotonic() + self._startup_timeout
        changing: Stamp | None = None
        worker.busy = True
        try:
            message = pickle.loads(worker.exchange(_RELOAD, deadline))
            while message[0] == "reloading":
                changing = message[1]
                message = pickle.loads(worker.receive(deadline))
        except (_Late, _Lost) as exc:
            if self._closed:
                self._discard(worker)
                return
            if isinstance(exc, _Late):
                outcome = f"did not finish within {self._startup_timeout:g}s"
            else:
                outcome = f"made the policy worker exit (exit code {worker.exit_code(wait=_EXIT_GRACE_SECONDS)})"
            error = f"reloading the changed policy files {outcome}; keeping revision {self._revision}"
            log.error("%s", error)
            # The replacement is given this state of the files as failed, so it does not try them again.
            self._failed_stamp, self._last_reload_error = changing, error
            self._discard(worker)
            return
        finally:
            worker.busy = False
        _, revision, error, failed_stamp, sources, paths = message
        self._paths = (revision, paths)
        if sources is not None:
            self._sources = sources
            log.info("policy reloaded: revision %s", revision)
        if error and error != self._last_reload_error:
            log.error("keeping the last good policy (revision %s): %s", revision, error)
        self._revision, self._last_reload_error, self._failed_stamp = revision, error, failed_stamp


def _identity(path: str) -> tuple[int, int, int, int]:
    info = os.stat(path)  # follows symlinks: a ConfigMap update swaps the link target
    return info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev


def _monotonic() -> float:
    # The time limit is about real CPU time spent, never the injected (possibly virtual) clock.
    return time.monotonic()
