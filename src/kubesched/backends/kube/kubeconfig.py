"""Where the API server is and who we are to it: kubeconfig files and the in-cluster service account.

Called by ``kubesched run`` (and ``kubesched bench --api``) before the client is built. The rules are
kube-scheduler's (client-go's ``clientcmd``):

* ``--kubeconfig`` wins, then ``clientConnection.kubeconfig`` from the configuration file, then the
  ``KUBECONFIG`` variable (a ``:``-separated list of files merged first-wins: the first file to name a
  cluster, user or context, or the current context, decides it), and with none of them the in-cluster
  service account (``KUBERNETES_SERVICE_HOST``/``PORT``, the token and CA under
  ``/var/run/secrets/kubernetes.io/serviceaccount``);
* ``--context`` picks a context, else ``current-context``;
* file paths inside a kubeconfig are relative to that file;
* users authenticate with ``token``, ``tokenFile`` (re-read as it rotates), client certificates (file or
  ``-data``), basic auth, or an ``exec`` credential plugin (``client.authentication.k8s.io``).

Every problem is a :class:`~kubesched.backends.kube.errors.KubeConfigError` naming the file and the field.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.backends.kube.errors import KubeConfigError

IN_CLUSTER_ROOT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, slots=True)
class ExecCredentialPlugin:
    """A kubeconfig ``user.exec``: a command that prints an ExecCredential."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    working_dir: str = "."


@dataclass(frozen=True, slots=True)
class ClusterConnection:
    """Everything the client needs to reach and authenticate to one API server."""

    server: str
    source: str  # where this came from, for messages ("kubeconfig /x (context kind-kind)", "in-cluster")
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""
    client_certificate_data: bytes | None = None
    client_key_data: bytes | None = None
    token: str = ""
    token_file: str = ""
    username: str = ""
    password: str = ""
    exec_plugin: ExecCredentialPlugin | None = None
    namespace: str = "default"


def load_connection(
    kubeconfig: str = "",
    context: str = "",
    *,
    configured_kubeconfig: str = "",
    environ: Mapping[str, str] | None = None,
    in_cluster_root: Path = IN_CLUSTER_ROOT,
) -> ClusterConnection:
    """The connection the flags, the configuration file and the environment name (rules in the module doc)."""
    env = os.environ if environ is None else environ
    if kubeconfig or configured_kubeconfig:
        return _from_files([Path(kubeconfig or configured_kubeconfig)], context)
    listed = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return _from_files(listed, context)
    if context:
        raise KubeConfigError(f"--context {context!r} needs a kubeconfig (--kubeconfig or KUBECONFIG)")
    return in_cluster(env, in_cluster_root)


def in_cluster(environ: Mapping[str, str], root: Path = IN_CLUSTER_ROOT) -> ClusterConnection:
    host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError(
            "no kubeconfig given (--kubeconfig, clientConnection.kubeconfig or KUBECONFIG) and not running in a "
            "cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)"
        )
    token_file = root / "token"
    if not token_file.is_file():
        raise KubeConfigError(f"in-cluster configuration: {token_file}: the service account token is missing")
    ca_file = root / "ca.crt"
    ca = _read(ca_file, "in-cluster configuration") if ca_file.is_file() else None
    namespace_file = root / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    server_host = f"[{host}]" if ":" in host else host
    return ClusterConnection(
        server=f"https://{server_host}:{port}",
        source="in-cluster service account",
        ca_data=ca,
        token_file=str(token_file),
        namespace=namespace or "default",
    )


class _Merged:
    """The named clusters, users and contexts of several kubeconfig files, first file wins."""

    def __init__(self) -> None:
        self.clusters: dict[str, tuple[Mapping[str, Any], Path]] = {}
        self.users: dict[str, tuple[Mapping[str, Any], Path]] = {}
        self.contexts: dict[str, tuple[Mapping[str, Any], Path]] = {}
        self.current_context = ""

    def add(self, path: Path) -> None:
        try:
            document = yaml.safe_load(path.read_text())
        except OSError as error:
            raise KubeConfigError(f"kubeconfig {path}: cannot be read: {error.strerror or error}") from error
        except yaml.YAMLError as error:
            raise KubeConfigError(f"kubeconfig {path}: not valid YAML: {error}") from error
        if document is None:
            return
        if not isinstance(document, Mapping):
            raise KubeConfigError(f"kubeconfig {path}: must be a mapping, not {type(document).__name__}")
        for key, into in (("clusters", self.clusters), ("users", self.users), ("contexts", self.contexts)):
            entries = document.get(key) or []
            if not isinstance(entries, list):
                raise KubeConfigError(f"kubeconfig {path}: {key}: must be a list")
            inner = key[:-1]
            for i, entry in enumerate(entries):
                if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                    raise KubeConfigError(f"kubeconfig {path}: {key}[{i}].name: Required value")
                body = entry.get(inner) or {}
                if not isinstance(body, Mapping):
                    raise KubeConfigError(f"kubeconfig {path}: {key}[{i}].{inner}: must be a mapping")
                into.setdefault(entry["name"], (body, path))
        current = document.get("current-context")
        if not self.current_context and isinstance(current, str):
            self.current_context = current


def _from_files(paths: list[Path], context_name: str) -> ClusterConnection:
    merged = _Merged()
    for path in paths:
        if len(paths) > 1 and not path.exists():
            continue  # KUBECONFIG may list files that do not exist (clientcmd skips them)
        merged.add(path)
    files = ", ".join(str(p) for p in paths)
    name = context_name or merged.current_context
    if not name:
        raise KubeConfigError(f"kubeconfig {files}: current-context: Required value (or pass --context)")
    if name not in merged.contexts:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise KubeConfigError(f'kubeconfig {files}: context "{name}" not found (contexts: {known})')
    context, context_file = merged.contexts[name]
    where = f"kubeconfig {context_file}: context {name}"
    cluster_name, user_name = context.get("cluster"), context.get("user", "")
    if not isinstance(cluster_name, str) or cluster_name not in merged.clusters:
        raise KubeConfigError(f'{where}: cluster "{cluster_name}" not found')
    cluster, cluster_file = merged.clusters[cluster_name]
    user: Mapping[str, Any] = {}
    user_file = context_file
    if user_name:
        if not isinstance(user_name, str) or user_name not in merged.users:
            raise KubeConfigError(f'{where}: user "{user_name}" not found')
        user, user_file = merged.users[user_name]
    cluster_where = f"kubeconfig {cluster_file}: clusters[{cluster_name}].cluster"
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise KubeConfigError(f"{cluster_where}.server: must be an http(s) URL, not {server!r}")
    user_where = f"kubeconfig {user_file}: users[{user_name}].user"
    namespace = context.get("namespace")
    return ClusterConnection(
        server=server.rstrip("/"),
        source=f"kubeconfig {context_file} (context {name})",
        ca_data=_pem(cluster, "certificate-authority", cluster_file, cluster_where),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=str(cluster.get("tls-server-name", "")),
        client_certificate_data=_pem(user, "client-certificate", user_file, user_where),
        client_key_data=_pem(user, "client-key", user_file, user_where),
        token=str(user.get("token", "")),
        token_file=_relative(user.get("tokenFile", ""), user_file),
        username=str(user.get("username", "")),
        password=str(user.get("password", "")),
        exec_plugin=_exec_plugin(user.get("exec"), user_file, user_where),
        namespace=namespace if isinstance(namespace, str) and namespace else "default",
    )


def _relative(value: object, base_file: Path) -> str:
    if not value:
        return ""
    return str((base_file.parent / str(value)).resolve()) if not os.path.isabs(str(value)) else str(value)


def _read(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise KubeConfigError(f"{where}: {path}: cannot be read: {error.strerror or error}") from error


def _pem(section: Mapping[str, Any], key: str, base_file: Path, where: str) -> bytes | None:
    """``key-data`` (base64) or the file ``key`` names, as PEM bytes."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError) as error:
            raise KubeConfigError(f"{where}.{key}-data: not valid base64") from error
    path = section.get(key)
    if path:
        return _read(Path(_relative(path, base_file)), f"{where}.{key}")
    return None


def _exec_plugin(value: object, base_file: Path, where: str) -> ExecCredentialPlugin | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get("command"), str) or not value["command"]:
        raise KubeConfigError(f"{where}.exec.command: Required value")
    env: dict[str, str] = {}
    for i, item in enumerate(value.get("env") or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise KubeConfigError(f"{where}.exec.env[{i}].name: Required value")
        env[item["name"]] = str(item.get("value", ""))
    command = value["command"]
    # clientcmd resolves a command with a path separator relative to the kubeconfig; bare names use PATH.
    if os.sep in command and not os.path.isabs(command):
        command = _relative(command, base_file)
    return ExecCredentialPlugin(
        command=command,
        args=tuple(str(a) for a in value.get("args") or []),
        env=env,
        api_version=str(value.get("apiVersion", "client.authentication.k8s.io/v1")),
        working_dir=str(base_file.parent),
    )
