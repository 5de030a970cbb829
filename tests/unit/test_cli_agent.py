"""``kubesched agent``'s flags: the listen address, and files that cannot be read named by their flag (the command
itself is tested in tests/e2e/test_agent.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.cli.agent import AgentUsageError, parse_listen
from kubesched.cli.main import main


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        pytest.param("127.0.0.1:8443", ("127.0.0.1", 8443), id="ipv4"),
        pytest.param("[::1]:8443", ("::1", 8443), id="ipv6"),
        pytest.param(":8443", ("0.0.0.0", 8443), id="no-host-is-every-address"),
    ],
)
def test_listen_addresses(listen: str, expected: tuple[str, int]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["8443", "host:", "host:http", "host:70000"])
def test_a_bad_listen_address_is_one_error(listen: str) -> None:
    with pytest.raises(AgentUsageError, match="must be HOST:PORT"):
        parse_listen(listen)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: member, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: agent, user: {token: abc}}]
contexts: [{name: member, context: {cluster: member, user: agent}}]
current-context: member
"""


@pytest.fixture
def agent_files(tmp_path: Path) -> dict[str, Path]:
    """A kubeconfig, a token file and junk certificate files."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    return {"--kubeconfig": kubeconfig, "--token-file": token, "--tls-cert": cert, "--tls-key": key}


def agent_argv(files: dict[str, Path]) -> list[str]:
    return ["agent", "--listen", "127.0.0.1:0", *(item for flag, path in files.items() for item in (flag, str(path)))]


@pytest.mark.parametrize("flag", ["--tls-cert", "--tls-key", "--token-file"])
def test_a_missing_file_names_its_flag_and_path(
    agent_files: dict[str, Path], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = agent_files[flag].with_name("missing.pem")
    agent_files[flag] = missing
    assert main(agent_argv(agent_files)) == 1
    assert capsys.readouterr().err.splitlines() == [f"error: {flag} {missing}: No such file or directory"]


def test_a_certificate_that_is_not_pem_names_both_files(
    agent_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(agent_argv(agent_files)) == 1
    [line] = capsys.readouterr().err.splitlines()
    cert, key = agent_files["--tls-cert"], agent_files["--tls-key"]
    assert line.startswith(f"error: --tls-cert {cert} / --tls-key {key}: not a PEM certificate and its private key")
