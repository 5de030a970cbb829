"""load_connection: kubeconfig files, KUBECONFIG merging, the in-cluster service account, and every error.

Checked with whole ClusterConnection values: contexts, clusters and users; certificate files relative to the
kubeconfig; ``-data`` fields in base64; tokens, token files, basic auth, exec plugins (a relative command is
relative to the kubeconfig, a bare one is left to PATH); KUBECONFIG with several files (first wins, missing
files skipped, relative paths relative to the file that named them); the precedence of the flag, the
configuration file, KUBECONFIG and in-cluster; in-cluster from a fake service-account directory (IPv6 hosts
bracketed); and the exact KubeConfigError for each problem, naming the file and the field.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.backends.kube.errors import KubeConfigError
from kubesched.backends.kube.kubeconfig import ClusterConnection, ExecCredentialPlugin, in_cluster, load_connection

CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def kubeconfig(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, dict[str, Any]],
    current: str | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current is not None:
        document["current-context"] = current
    return document


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """A kubeconfig in conf/, with certificate files beside it and one directory up."""
    (tmp_path / "conf" / "certs").mkdir(parents=True)
    (tmp_path / "keys").mkdir()
    (tmp_path / "conf" / "certs" / "ca.pem").write_bytes(CA)
    (tmp_path / "conf" / "certs" / "client.crt").write_bytes(CERT)
    (tmp_path / "keys" / "client.key").write_bytes(KEY)
    write(
        tmp_path / "conf" / "config",
        kubeconfig(
            clusters={
                "files": {"server": "https://api.example:6443/", "certificate-authority": "certs/ca.pem"},
                "inline": {
                    "server": "https://10.1.2.3:443",
                    "certificate-authority-data": b64(CA),
                    "tls-server-name": "kubernetes.default",
                },
                "insecure": {"server": "http://127.0.0.1:8080", "insecure-skip-tls-verify": True},
            },
            users={
                "certs": {"client-certificate": "certs/client.crt", "client-key": "../keys/client.key"},
                "inline-certs": {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
                "token": {"token": "abc.def"},
                "token-file": {"tokenFile": "../tokens/sa"},
                "basic": {"username": "admin", "password": "hunter2"},
                "exec-relative": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "./bin/credential",
                        "args": ["get-token", "--cluster", "prod"],
                        "env": [{"name": "REGION", "value": "eu-west-1"}, {"name": "EMPTY"}],
                    }
                },
                "exec-path": {"exec": {"command": "aws"}},
            },
            contexts={
                "files": {"cluster": "files", "user": "certs", "namespace": "apps"},
                "inline": {"cluster": "inline", "user": "inline-certs"},
                "token": {"cluster": "insecure", "user": "token"},
                "token-file": {"cluster": "files", "user": "token-file"},
                "basic": {"cluster": "insecure", "user": "basic"},
                "exec-relative": {"cluster": "files", "user": "exec-relative"},
                "exec-path": {"cluster": "files", "user": "exec-path"},
                "anonymous": {"cluster": "insecure"},
            },
            current="token",
        ),
    )
    return tmp_path


def expected(config_dir: Path, context: str) -> ClusterConnection:
    path = config_dir / "conf" / "config"
    source = f"kubeconfig {path} (context {context})"
    files = {"server": "https://api.example:6443", "ca_data": CA}
    insecure = {"server": "http://127.0.0.1:8080", "insecure_skip_tls_verify": True}
    fields: dict[str, dict[str, Any]] = {
        "files": {**files, "client_certificate_data": CERT, "client_key_data": KEY, "namespace": "apps"},
        "inline": {
            "server": "https://10.1.2.3:443",
            "ca_data": CA,
            "tls_server_name": "kubernetes.default",
            "client_certificate_data": CERT,
            "client_key_data": KEY,
        },
        "token": {**insecure, "token": "abc.def"},
        "token-file": {**files, "token_file": str(config_dir / "tokens" / "sa")},
        "basic": {**insecure, "username": "admin", "password": "hunter2"},
        "exec-relative": {
            **files,
            "exec_plugin": ExecCredentialPlugin(
                command=str(config_dir / "conf" / "bin" / "credential"),
                args=("get-token", "--cluster", "prod"),
                env={"REGION": "eu-west-1", "EMPTY": ""},
                api_version="client.authentication.k8s.io/v1beta1",
                working_dir=str(config_dir / "conf"),
            ),
        },
        "exec-path": {
            **files,
            "exec_plugin": ExecCredentialPlugin(command="aws", working_dir=str(config_dir / "conf")),
        },
        "anonymous": insecure,
    }
    return ClusterConnection(source=source, **fields[context])


CONTEXTS = ["files", "inline", "token", "token-file", "basic", "exec-relative", "exec-path", "anonymous"]


@pytest.mark.parametrize("context", [pytest.param(c, id=c) for c in CONTEXTS])
def test_each_context_of_a_kubeconfig(context: str, config_dir: Path) -> None:
    connection = load_connection(str(config_dir / "conf" / "config"), context, environ={})
    assert connection == expected(config_dir, context)


def test_the_current_context_is_the_default(config_dir: Path) -> None:
    assert load_connection(str(config_dir / "conf" / "config"), environ={}) == expected(config_dir, "token")


@pytest.mark.parametrize(
    ("flag", "configured", "variable", "winner"),
    [
        pytest.param("a", "b", "c", "a", id="flag-wins"),
        pytest.param("", "b", "c", "b", id="then-the-configuration-file"),
        pytest.param("", "", "c", "c", id="then-KUBECONFIG"),
    ],
)
def test_where_the_kubeconfig_comes_from(
    flag: str, configured: str, variable: str, winner: str, tmp_path: Path
) -> None:
    for name in "abc":
        write(
            tmp_path / name,
            kubeconfig({"c": {"server": f"https://{name}.example"}}, {}, {"x": {"cluster": "c"}}, current="x"),
        )

    def at(name: str) -> str:
        return str(tmp_path / name) if name else ""

    connection = load_connection(
        at(flag), configured_kubeconfig=at(configured), environ={"KUBECONFIG": at(variable)}, in_cluster_root=tmp_path
    )
    assert connection.server == f"https://{winner}.example"


def test_KUBECONFIG_merges_its_files_first_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path / "one" / "config",
        kubeconfig(
            clusters={"shared": {"server": "https://first.example", "certificate-authority": "ca.pem"}},
            users={"shared": {"token": "first-token"}},
            contexts={"work": {"cluster": "shared", "user": "shared", "namespace": "first"}},
        ),  # no current-context: the next file's decides
    )
    (tmp_path / "one" / "ca.pem").write_bytes(b"first CA")
    second = write(
        tmp_path / "two" / "config",
        kubeconfig(
            clusters={
                "shared": {"server": "https://second.example"},
                "own": {"server": "https://own.example", "certificate-authority": "ca.pem"},
            },
            users={"shared": {"token": "second-token"}, "own": {"tokenFile": "token"}},
            contexts={
                "work": {"cluster": "own", "user": "own"},
                "mixed": {"cluster": "own", "user": "shared"},
            },
            current="mixed",
        ),
    )
    (tmp_path / "two" / "ca.pem").write_bytes(b"second CA")
    missing = tmp_path / "nowhere" / "config"
    variable = os.pathsep.join([str(missing), str(first), "", str(second)])

    work = load_connection(context="work", environ={"KUBECONFIG": variable})
    assert work == ClusterConnection(
        server="https://first.example",
        source=f"kubeconfig {first} (context work)",
        ca_data=b"first CA",
        token="first-token",
        namespace="first",
    )
    mixed = load_connection(environ={"KUBECONFIG": variable})  # the current context of the second file
    assert mixed == ClusterConnection(
        server="https://own.example",
        source=f"kubeconfig {second} (context mixed)",
        ca_data=b"second CA",  # relative to the file that named the cluster
        token="first-token",  # the user "shared" of the first file
    )


def write_service_account(root: Path, *, ca: bool = True, namespace: str | None = "kube-system") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "token").write_text("sa-token\n")
    if ca:
        (root / "ca.crt").write_bytes(CA)
    if namespace is not None:
        (root / "namespace").write_text(namespace + "\n")


@pytest.mark.parametrize(
    ("host", "server", "ca", "namespace", "expected_namespace"),
    [
        pytest.param("10.96.0.1", "https://10.96.0.1:443", True, "kube-system", "kube-system", id="ipv4"),
        pytest.param("fd00:10:96::1", "https://[fd00:10:96::1]:443", True, "kube-system", "kube-system", id="ipv6"),
        pytest.param(
            "kubernetes.default.svc", "https://kubernetes.default.svc:443", False, None, "default", id="no-ca"
        ),
        pytest.param("10.96.0.1", "https://10.96.0.1:443", True, "", "default", id="empty-namespace-file"),
    ],
)
def test_in_cluster_from_the_service_account(
    host: str, server: str, ca: bool, namespace: str | None, expected_namespace: str, tmp_path: Path
) -> None:
    root = tmp_path / "serviceaccount"
    write_service_account(root, ca=ca, namespace=namespace)
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    connection = load_connection(environ=environ, in_cluster_root=root)
    assert connection == ClusterConnection(
        server=server,
        source="in-cluster service account",
        ca_data=CA if ca else None,
        token_file=str(root / "token"),
        namespace=expected_namespace,
    )
    assert in_cluster(environ, root) == connection


NO_CONFIG = (
    "no kubeconfig given (--kubeconfig, clientConnection.kubeconfig or KUBECONFIG) and not running in a "
    "cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)"
)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        pytest.param({}, NO_CONFIG, id="nothing-at-all"),
        pytest.param({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, NO_CONFIG, id="host-without-port"),
        pytest.param({"KUBECONFIG": ""}, NO_CONFIG, id="empty-KUBECONFIG"),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            "in-cluster configuration: {root}/token: the service account token is missing",
            id="no-token",
        ),
    ],
)
def test_without_a_kubeconfig_or_a_service_account(environ: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError) as caught:
        load_connection(environ=environ, in_cluster_root=tmp_path)
    assert str(caught.value) == message.format(root=tmp_path)


def test_a_context_without_a_kubeconfig_is_refused(tmp_path: Path) -> None:
    write_service_account(tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(KubeConfigError) as caught:
        load_connection(context="prod", environ=environ, in_cluster_root=tmp_path)
    assert str(caught.value) == "--context 'prod' needs a kubeconfig (--kubeconfig or KUBECONFIG)"


GOOD_CLUSTER = {"server": "https://api.example"}


def one_context(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    return kubeconfig(
        {"c": cluster if cluster is not None else GOOD_CLUSTER},
        {"u": user if user is not None else {}},
        {"x": {"cluster": "c", "user": "u"}},
        current="x",
    )


@pytest.mark.parametrize(
    ("document", "context", "message"),
    [
        pytest.param(
            one_context({**GOOD_CLUSTER, "certificate-authority-data": "not base64!"}),
            "",
            "{file}: clusters[c].cluster.certificate-authority-data: not valid base64",
            id="bad-base64-ca",
        ),
        pytest.param(
            one_context(user={"client-certificate-data": b64(CERT), "client-key-data": "%%%"}),
            "",
            "{file}: users[u].user.client-key-data: not valid base64",
            id="bad-base64-key",
        ),
        pytest.param(
            one_context(user={"client-certificate": "missing.crt"}),
            "",
            "{file}: users[u].user.client-certificate: {dir}/missing.crt: cannot be read: No such file or directory",
            id="missing-certificate-file",
        ),
        pytest.param(
            kubeconfig({"c": GOOD_CLUSTER}, {}, {"b": {"cluster": "c"}, "a": {"cluster": "c"}}),
            "prod",
            '{file}: context "prod" not found (contexts: a, b)',
            id="unknown-context-lists-the-contexts",
        ),
        pytest.param(
            kubeconfig({"c": GOOD_CLUSTER}, {}, {}, current="gone"),
            "",
            '{file}: context "gone" not found (contexts: none)',
            id="current-context-not-defined",
        ),
        pytest.param(
            kubeconfig({"c": GOOD_CLUSTER}, {}, {"a": {"cluster": "c"}}),
            "",
            "{file}: current-context: Required value (or pass --context)",
            id="no-current-context",
        ),
        pytest.param(
            kubeconfig({}, {}, {"x": {"cluster": "c"}}, current="x"),
            "",
            '{file}: context x: cluster "c" not found',
            id="unknown-cluster",
        ),
        pytest.param(
            kubeconfig({"c": GOOD_CLUSTER}, {}, {"x": {"cluster": "c", "user": "nobody"}}, current="x"),
            "",
            '{file}: context x: user "nobody" not found',
            id="unknown-user",
        ),
        pytest.param(
            one_context({"server": "api.example:6443"}),
            "",
            "{file}: clusters[c].cluster.server: must be an http(s) URL, not 'api.example:6443'",
            id="server-not-a-url",
        ),
        pytest.param(
            one_context({}),
            "",
            "{file}: clusters[c].cluster.server: must be an http(s) URL, not None",
            id="no-server",
        ),
        pytest.param(
            one_context(user={"exec": {"args": ["x"]}}),
            "",
            "{file}: users[u].user.exec.command: Required value",
            id="exec-without-command",
        ),
        pytest.param(
            one_context(user={"exec": {"command": "x", "env": [{"value": "v"}]}}),
            "",
            "{file}: users[u].user.exec.env[0].name: Required value",
            id="exec-env-without-name",
        ),
        pytest.param(
            {"clusters": {"c": GOOD_CLUSTER}}, "", "{file}: clusters: must be a list", id="clusters-not-a-list"
        ),
        pytest.param({"users": [{"user": {}}]}, "", "{file}: users[0].name: Required value", id="entry-without-a-name"),
        pytest.param(
            {"contexts": [{"name": "x", "context": "c"}]},
            "",
            "{file}: contexts[0].context: must be a mapping",
            id="context-not-a-mapping",
        ),
        pytest.param(["a", "list"], "", "{file}: must be a mapping, not list", id="document-a-list"),
    ],
)
def test_kubeconfig_errors_name_the_file_and_the_field(
    document: Any, context: str, message: str, tmp_path: Path
) -> None:
    path = write(tmp_path / "config", document)
    with pytest.raises(KubeConfigError) as caught:
        load_connection(str(path), context, environ={})
    assert str(caught.value) == message.format(file=f"kubeconfig {path}", dir=tmp_path)


def test_a_kubeconfig_that_is_not_yaml_or_not_there(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken", "clusters: [\n")
    with pytest.raises(KubeConfigError) as caught:
        load_connection(str(broken), environ={})
    assert str(caught.value).startswith(f"kubeconfig {broken}: not valid YAML: ")

    missing = tmp_path / "missing"
    with pytest.raises(KubeConfigError) as caught:
        load_connection(str(missing), environ={})
    assert str(caught.value) == f"kubeconfig {missing}: cannot be read: No such file or directory"
    with pytest.raises(KubeConfigError) as caught:  # a single KUBECONFIG file must exist
        load_connection(environ={"KUBECONFIG": str(missing)})
    assert str(caught.value) == f"kubeconfig {missing}: cannot be read: No such file or directory"


def test_an_empty_kubeconfig_file_has_no_current_context(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty", "")
    with pytest.raises(KubeConfigError) as caught:
        load_connection(str(empty), environ={})
    assert str(caught.value) == f"kubeconfig {empty}: current-context: Required value (or pass --context)"
