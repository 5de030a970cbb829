"""A real Kubernetes control plane, etcd and kube-apiserver, started from envtest's binaries for tests.

Who calls it: the end-to-end tests (``tests/e2e``, through their ``control_plane`` fixture) and
``kubesched bench --api``, which need the real API server's answers (201 and 409 for bindings, RBAC's 403, 410
Gone for watches from an expired resourceVersion) rather than a fake. The binaries are those of
controller-runtime's envtest, found through the usual variable::

    export KUBEBUILDER_ASSETS="$(setup-envtest use -p path 1.34.x)"   # kube-apiserver and etcd

    with ControlPlane(assets_directory(), tmp_path) as plane:
        status, node = plane.request("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
        plane.write_kubeconfig(tmp_path / "kubeconfig", user="scheduler")

etcd listens on free loopback ports with its data in ``workdir`` (no fsync: throwaway data); kube-apiserver
serves HTTPS on a free loopback port with a certificate from :mod:`kubesched.harness.certificates`, authorises
with RBAC, and knows two users by static bearer token: ``admin`` (group ``system:masters``) and
``system:kube-scheduler`` (no groups, so exactly the built-in scheduler role). With no controller manager and
no kubelet, the ``ServiceAccount`` and ``TaintNodesByCondition`` admission plugins are off: pods need no
ServiceAccount and new Nodes get no not-ready taint. Both processes log to files in ``workdir``
(``etcd.log``, ``kube-apiserver.log``); a start that fails says why with the tail of the log.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from kubesched.harness.certificates import write_server_certificates, write_signing_key

__all__ = ["ASSETS_VARIABLE", "ControlPlane", "ControlPlaneError", "assets_directory"]

ASSETS_VARIABLE = "KUBEBUILDER_ASSETS"
START_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# user key of token() and write_kubeconfig() -> (user name, groups) in kube-apiserver's static token file
USERS = {"admin": ("admin", ("system:masters",)), "scheduler": ("system:kube-scheduler", ())}


class ControlPlaneError(RuntimeError):
    """etcd or kube-apiserver did not start (the message carries the tail of its log)."""


def assets_directory() -> Path | None:
    """The directory ``KUBEBUILDER_ASSETS`` names, when it is set and holds ``kube-apiserver`` and ``etcd``."""
    value = os.environ.get(ASSETS_VARIABLE)
    if not value:
        return None
    directory = Path(value)
    if not all(os.access(directory / binary, os.X_OK) for binary in ("kube-apiserver", "etcd")):
        return None
    return directory


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        port: int = listener.getsockname()[1]
        return port


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ControlPlane:
    """etcd plus kube-apiserver on loopback, for one test session or one benchmark run (see the module doc)."""

    def __init__(
        self,
        assets: Path,
        workdir: Path,
        *,
        watch_cache: bool = True,
        extra_apiserver_args: Sequence[str] = (),
        etcd_of: ControlPlane | None = None,
        etcd_prefix: str = "/registry",
    ) -> None:
        """``watch_cache=False`` sends every watch and list to etcd (see :meth:`compact_etcd`);
        ``extra_apiserver_args`` are appended to kube-apiserver's command line (they win over ours).
        ``etcd_of``: use that (started) control plane's etcd instead of starting one, under ``etcd_prefix``
        (a key prefix of its own: to its clients this is another cluster). Many members then cost one etcd."""
        self.assets = assets
        self.workdir = workdir
        self.watch_cache = watch_cache
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.etcd_of = etcd_of
        self.etcd_prefix = etcd_prefix
        self._tokens = {user: secrets.token_urlsafe(32) for user in USERS}
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._etcd_url = ""
        self._etcd_ports: tuple[int, int] | None = None  # (client, peer), kept for a start after a stop
        self._prepared = False
        self._port = 0
        self._ssl: ssl.SSLContext | None = None
        pki = workdir / "pki"
        self.ca_file, self._cert_file, self._key_file = pki / "ca.pem", pki / "tls.crt", pki / "tls.key"
        self._signing_key, self._token_file = pki / "service-account.key", pki / "tokens.csv"

    # ---------------------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT``, kube-apiserver's address (set by :meth:`start`)."""
        if not self._port:
            raise RuntimeError("the control plane is not started")
        return f"https://127.0.0.1:{self._port}"

    def start(self) -> None:
        """Write certificates, keys and tokens, start etcd and then kube-apiserver, and wait for ``/readyz``.

        After :meth:`stop` it starts again as the same cluster: the same certificates, tokens and ports, and etcd
        on its data directory (what was stored before the stop is there again), as a member whose control plane
        was down for a while."""
        if self._etcd is not None or self._apiserver is not None:
            raise RuntimeError("the control plane is already started")
        try:
            if not self._prepared:
                self._prepare()
                self._prepared = True
            if self.etcd_of is None:
                self._start_etcd()
            else:
                self._etcd_url = self.etcd_of.etcd_url
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd: SIGTERM, then SIGKILL after a grace period. Safe to call twice."""
        try:
            _stop(self._apiserver)
        finally:
            self._apiserver = None
            _stop(self._etcd)  # only our own: a shared etcd belongs to the plane that started it
            self._etcd = None
            self._etcd_url = ""

    @property
    def etcd_url(self) -> str:
        if not self._etcd_url:
            raise RuntimeError("the control plane is not started")
        return self._etcd_url

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port with the same certificates and tokens."""
        if not self._etcd_url:
            raise RuntimeError("the control plane is not started")
        _stop(self._apiserver)
        self._apiserver = None
        try:
            self._start_apiserver()
        except BaseException:
            self.stop()
            raise

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision and return it: older resourceVersions are gone from etcd.

        What a client sees depends on the watch cache. Without it (``watch_cache=False``) a watch from an older
        resourceVersion then answers HTTP 200 with one ``ERROR`` event, a Status of code 410 (reason
        ``Expired``), and a list at an older exact resourceVersion answers HTTP 410. With it (the default, as
        in real clusters) kube-apiserver keeps serving such watches and lists from its memory as long as they
        are in its window: there a 410 comes from a restart (:meth:`restart_apiserver` starts a new window).

        Uses etcd's v3 JSON gateway: ``/v3/kv/range`` for the revision, ``/v3/kv/compaction`` (physical, so it
        returns once the compaction is applied).
        """
        header = self._etcd_call("/v3/kv/range", {"key": base64.b64encode(b"\0").decode(), "count_only": True})
        revision = int(header["header"]["revision"])
        self._etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    # ---------------------------------------------------------------------------------------------- clients

    def token(self, user: str = "admin") -> str:
        """The bearer token of ``"admin"`` (system:masters) or ``"scheduler"`` (system:kube-scheduler)."""
        if user not in self._tokens:
            raise ValueError(f"unknown user {user!r}: one of {sorted(self._tokens)}")
        return self._tokens[user]

    def write_kubeconfig(self, path: Path, user: str = "admin", context_name: str = "kubesched-envtest") -> Path:
        """Write a kubeconfig for ``user`` (its token, the CA inline) with one context, the current one."""
        token, name = self.token(user), USERS[user][0]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": context_name,
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": context_name, "context": {"cluster": context_name, "user": name}}],
            "current-context": context_name,
            "preferences": {},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        user: str = "admin",
        token: str | None = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """One synchronous API call: the status and the decoded JSON answer, also for 4xx and 5xx (no raise).

        It authenticates as ``user`` (see :meth:`token`), or with ``token`` when one is given (a service
        account's, say). ``body`` is sent as JSON unless it is ``bytes`` or ``str``. An empty answer decodes to
        ``None``, one that is not JSON to its text. A watch (``watch`` in ``query``; give it ``timeoutSeconds``)
        answers the list of the events the server sent before it ended the stream.
        """
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else None
        if data is None and body is not None:
            data = json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.token(user)}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        http_request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(http_request, timeout=timeout, context=self._context()) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
            error.close()
        if not raw:
            return status, None
        text = raw.decode(errors="replace")
        try:
            if status == 200 and query and query.get("watch") in ("1", "true"):
                return status, [json.loads(line) for line in text.splitlines() if line.strip()]
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    # ---------------------------------------------------------------------------------------------- internals

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        return self._ssl

    def _prepare(self) -> None:
        files = write_server_certificates(self.ca_file.parent)
        assert files == (self.ca_file, self._cert_file, self._key_file)
        write_signing_key(self._signing_key)
        lines = []
        for user, (name, groups) in USERS.items():
            line = f"{self._tokens[user]},{name},{name}"
            lines.append(line + (f',"{",".join(groups)}"' if groups else ""))
        self._token_file.write_text("\n".join(lines) + "\n")
        self._token_file.chmod(0o600)
        self._ssl = None

    def _launch(self, name: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        with (self.workdir / f"{name}.log").open("ab") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} starting {name}\n".encode())
            log.flush()
            return subprocess.Popen(
                [str(self.assets / name), *arguments],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )

    def _start_etcd(self) -> None:
        if self._etcd_ports is None:
            self._etcd_ports = (_free_port(), _free_port())
        client, peer = self._etcd_ports
        self._etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._etcd = self._launch(
            "etcd",
            [
                "--name=kubesched",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={self._etcd_url}",
                f"--advertise-client-urls={self._etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kubesched={peer_url}",
                "--unsafe-no-fsync",
            ],
        )
        self._wait("etcd", self._etcd, self._etcd_healthy)

    def _start_apiserver(self) -> None:
        if not self._port:
            self._port = _free_port()
        self._apiserver = self._launch(
            "kube-apiserver",
            [
                f"--etcd-servers={self._etcd_url}",
                f"--etcd-prefix={self.etcd_prefix}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self._port}",
                f"--cert-dir={self.workdir / 'pki'}",
                f"--tls-cert-file={self._cert_file}",
                f"--tls-private-key-file={self._key_file}",
                f"--token-auth-file={self._token_file}",
                f"--service-account-key-file={self._signing_key}",
                f"--service-account-signing-key-file={self._signing_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--endpoint-reconciler-type=none",
                f"--watch-cache={str(self.watch_cache).lower()}",
                *self.extra_apiserver_args,
            ],
        )
        self._wait("kube-apiserver", self._apiserver, self._apiserver_ready)

    def _wait(self, name: str, process: subprocess.Popen[bytes], ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        last = "no answer yet"
        while True:
            code = process.poll()
            if code is not None:
                problem = f"exited with status {code}"
                break
            try:
                if ready():
                    return
            except (OSError, http.client.HTTPException, ValueError) as error:  # refused, reset, half an answer
                last = f"{type(error).__name__}: {error}"
            if time.monotonic() > deadline:
                problem = f"was not ready after {START_TIMEOUT_SECONDS:.0f} s (last check: {last})"
                break
            time.sleep(0.1)
        log = self.workdir / f"{name}.log"
        raise ControlPlaneError(f"{name} {problem}; the end of {log}:\n{_log_tail(log)}")

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(self._etcd_url + "/health", timeout=2) as response:
            return bool(json.loads(response.read()).get("health") == "true")

    def _apiserver_ready(self) -> bool:
        status, _ = self.request("GET", "/readyz", timeout=2)  # 500 while its post-start hooks run
        return status == 200

    def _etcd_call(self, path: str, body: Mapping[str, Any]) -> Any:
        http_request = urllib.request.Request(
            self._etcd_url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(http_request, timeout=30) as response:
            return json.loads(response.read())
