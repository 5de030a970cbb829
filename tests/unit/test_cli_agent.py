"""``kubesched agent``'s flags: the listen address, the timeouts, and files that cannot be read named by their flag
(the command itself is tested in tests/e2e/test_agent.py); and ``kubesched run``'s member refresh interval."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kubesched.cli.agent import AgentUsageError, parse_listen
from kubesched.cli.main import build_parser, main


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


def _agent_args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(
        ["agent", "--listen", ":8443", "--token-file", "t", "--tls-cert", "c", "--tls-key", "k", *extra]
    )


def test_the_request_timeout_and_in_flight_window_are_flags() -> None:
    args = _agent_args("--request-timeout", "2", "--in-flight-seconds", "4.5")
    assert (args.request_timeout, args.in_flight_seconds) == (2.0, 4.5)
    defaults = _agent_args()
    assert (defaults.request_timeout, defaults.in_flight_seconds) == (10.0, None)  # in flight: timeout + 5


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_number_of_seconds_is_refused_naming_the_flag(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _agent_args("--in-flight-seconds", value)
    assert "--in-flight-seconds" in capsys.readouterr().err


def test_the_hub_refresh_interval_is_a_flag_of_run() -> None:
    assert build_parser().parse_args(["run", "--member-refresh-interval", "0.5"]).member_refresh_interval == 0.5
    assert build_parser().parse_args(["run"]).member_refresh_interval == 5.0


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


def test_an_empty_token_file_names_its_flag_and_path(
    agent_files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    agent_files["--token-file"].write_text("\n")
    assert main(agent_argv(agent_files)) == 1
    token = agent_files["--token-file"]
    assert capsys.readouterr().err.splitlines() == [f"error: the --token-file {token} is empty"]
