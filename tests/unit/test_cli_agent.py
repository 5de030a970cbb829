"""``kubesched agent``'s flags: the listen address (the command itself is tested in tests/e2e/test_agent.py)."""

from __future__ import annotations

import pytest

from kubesched.cli.agent import AgentUsageError, parse_listen


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
