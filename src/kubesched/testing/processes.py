"""``kubesched agent`` and ``kubesched run`` as child processes that a test can SIGKILL and start again, and an event
loop in a thread for the fault proxies in front of them.

Who calls it: :mod:`kubesched.testing.federation` and the crash tests (``tests/e2e/test_commit_crashes.py``). A
:class:`ChildProcess` appends its output to one log file across restarts (each start is marked in it), so a
failing test can show what every incarnation said. An :class:`AgentProcess` keeps its port, token and serving
certificate across restarts (the hub's MemberCluster names them once); :meth:`AgentProcess.start` returns once the
agent prints that it serves. A :class:`ProxyLoop` runs :class:`~kubesched.testing.fault_proxy.FaultProxy` s in a
daemon thread, so the test itself stays synchronous (it polls the API servers) while the proxies serve, and a
proxy hook (which runs in that thread) can SIGKILL a process at an exact step of the protocol.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from kubesched.agent.server import server_ssl_context
from kubesched.harness.certificates import write_server_certificates
from kubesched.testing.fault_proxy import FaultProxy

__all__ = ["AgentProcess", "ChildProcess", "HubProcess", "ProxyLoop", "free_port"]

T = TypeVar("T")

KUBESCHED = (sys.executable, "-m", "kubesched.cli.main")
START_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 20.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ChildProcess:
    """One command run as a child process, started again as often as the test likes; output in ``log``."""

    def __init__(self, name: str, command: Sequence[str], log: Path, *, ready_marker: str = "") -> None:
        """``ready_marker``: :meth:`start` waits until the log has one more line containing it."""
        self.name = name
        self.command = list(command)
        self.log = log
        self.ready_marker = ready_marker
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.alive and self.process is not None else None

    def _marks(self) -> int:
        try:
            return self.log.read_text(errors="replace").count(self.ready_marker)
        except FileNotFoundError:
            return 0

    def start(self) -> None:
        """Start the command (it must not be running) and, with a ready marker, wait until it says it is ready."""
        if self.alive:
            raise RuntimeError(f"{self.name} is running already")
        marks = self._marks() if self.ready_marker else 0
        self.starts += 1
        with self.log.open("ab") as handle:
            handle.write(f"--- {time.strftime('%H:%M:%S')} start #{self.starts} of {self.name}\n".encode())
            handle.flush()
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        if not self.ready_marker:
            return
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while self._marks() <= marks:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited at start:\n{self.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} was not ready within {START_TIMEOUT_SECONDS:.0f} s:\n{self.output()}")
            time.sleep(0.05)

    def kill(self) -> bool:
        """SIGKILL (no clean-up of any kind runs); whether it was running. Safe to call from any thread."""
        process = self.process
        if process is None or process.poll() is not None:
            return False
        process.send_signal(signal.SIGKILL)
        self.kills += 1
        return True

    def pause(self) -> bool:
        """SIGSTOP: frozen as by a long GC pause or a suspended VM, sockets open; whether it was running."""
        process = self.process
        if process is None or process.poll() is not None:
            return False
        process.send_signal(signal.SIGSTOP)
        return True

    def resume(self) -> None:
        """SIGCONT: it goes on where it stopped, unaware of the time that passed."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGCONT)

    def wait_dead(self, timeout: float = 10.0) -> None:
        if self.process is not None:
            self.process.wait(timeout)

    def terminate(self) -> int | None:
        """SIGTERM, then SIGKILL after a grace period; the exit status (None: it never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            process.send_signal(signal.SIGCONT)  # a paused process acts on SIGTERM only once it runs again
            try:
                process.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        return process.returncode

    def since_start(self) -> str:
        """What the process said since its last start."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return text.rsplit(f" start #{self.starts} of {self.name}\n", 1)[-1]

    def output(self, chars: int = 4000) -> str:
        try:
            return f"--- {self.log.name} (end):\n" + self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return f"--- {self.log.name}: no output"


class AgentProcess(ChildProcess):
    """``kubesched agent`` on a fixed loopback port with its own token and certificate, for the member whose
    kubeconfig is ``kubeconfig`` (the member's API server, or a fault proxy in front of it)."""

    def __init__(
        self,
        name: str,
        kubeconfig: Path,
        workdir: Path,
        *,
        namespace: str,
        request_timeout: float = 2.0,
        in_flight_seconds: float = 4.0,
        sweep_interval: float = 1.0,
        log_level: str = "info",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_urlsafe(24)
        token_file = workdir / "token"
        token_file.write_text(self.token + "\n")
        self.ca_file, self.cert_file, self.key_file = write_server_certificates(workdir / "pki")
        self.port = free_port()
        self.namespace = namespace
        command = [*KUBESCHED, "--log-level", log_level, "agent", "--kubeconfig", str(kubeconfig)]
        command += ["--listen", f"127.0.0.1:{self.port}", "--token-file", str(token_file)]
        command += ["--tls-cert", str(self.cert_file), "--tls-key", str(self.key_file), "--namespace", namespace]
        command += ["--cluster-name", name, "--sweep-interval", str(sweep_interval)]
        command += ["--request-timeout", str(request_timeout), "--in-flight-seconds", str(in_flight_seconds)]
        super().__init__(f"agent {name}", command, workdir / "agent.log", ready_marker="serving on https://")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def server_ssl(self) -> ssl.SSLContext:
        """A serving context with the agent's own certificate: a proxy in front of it looks like the agent."""
        return server_ssl_context(self.cert_file, self.key_file)


class HubProcess(ChildProcess):
    """``kubesched run`` with ``config`` on the hub's ``kubeconfig`` (no health server), as replica ``hostname``."""

    def __init__(
        self,
        hostname: str,
        config: Path,
        kubeconfig: Path,
        workdir: Path,
        *,
        refresh_interval: float = 0.5,
        audit_log: Path | None = None,
        log_level: str = "info",
    ) -> None:
        command = [
            *KUBESCHED,
            "--log-level",
            log_level,
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
        ]
        command += ["--hostname", hostname, "--port", "0", "--member-refresh-interval", str(refresh_interval)]
        if audit_log is not None:
            command += ["--audit-log", str(audit_log), "--audit-durability", "never"]
        self.audit_log = audit_log
        super().__init__(f"hub {hostname}", command, workdir / f"hub-{hostname}.log")


class ProxyLoop:
    """An asyncio loop in a daemon thread for fault proxies (module doc). ``with ProxyLoop() as loop:``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubesched-proxy-loop", daemon=True)
        self._proxies: list[FaultProxy] = []

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coroutine`` in the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[[], T], timeout: float = 60.0) -> T:
        """Call ``function`` in the loop's thread (where the proxies' rules are read) and wait for its result."""
        done: Future[T] = Future()

        def call() -> None:
            try:
                done.set_result(function())
            except BaseException as error:  # handed to the caller
                done.set_exception(error)

        self.loop.call_soon_threadsafe(call)
        return done.result(timeout)

    def start(self, proxy: FaultProxy) -> FaultProxy:
        """Start ``proxy`` in the loop (it is stopped by :meth:`close`)."""
        self.run(proxy.start())
        self._proxies.append(proxy)
        return proxy

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        for proxy in self._proxies:
            try:
                self.run(proxy.stop(), timeout=30)
            except Exception:  # stopping the others matters more
                continue
        self._proxies.clear()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()
