"""A policy engine that stops answering is one warning when its failures start and one when it answers again, on
the scheduler's clock, and no more than one start line a minute however often it flaps; an outage that
keeps every pod of a simulation pending says so at the default log level."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli.main import main
from kubesched.clock import VirtualClock
from kubesched.policy.outage import OUTAGE_REPORT_INTERVAL, OutageLog
from kubesched.policyapi.contract import Decision, InputPaths, PolicyError
from kubesched.testing.builders import make_node, make_pod


class FlakyEngine:
    """A policy client whose calls fail while ``down`` is set."""

    kind = "remote"

    def __init__(self) -> None:
        self.down = False
        self.closed = False

    def revision(self) -> str:
        return "r1"

    async def refresh(self) -> str:
        return "r1"

    async def decide(self, input_doc: Mapping[str, Any]) -> Decision:
        if self.down:
            raise PolicyError("cannot connect to http://opa:8181 (connection refused)")
        return Decision(allowed=True)

    async def decide_batch(
        self,
        pod: Mapping[str, Any],
        targets: Sequence[Mapping[str, Any]],
        *,
        target_kind: str,
        operation: str,
        time: str,
    ) -> dict[str, Decision]:
        if self.down:
            raise PolicyError("cannot connect to http://opa:8181 (connection refused)")
        return {str(target["metadata"]["name"]): Decision(allowed=True) for target in targets}

    def input_paths(self, revision: str) -> InputPaths | None:
        return None

    async def aclose(self) -> None:
        self.closed = True


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "kubesched.policy.outage"]


def test_one_line_when_failures_start_and_one_when_the_engine_answers_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock(1000.0)
    engine = FlakyEngine()
    logged = OutageLog(engine, clock, "http://opa:8181")

    async def calls() -> None:
        await logged.decide({})
        engine.down = True
        for _ in range(50):
            clock.advance(0.5)
            with pytest.raises(PolicyError):
                await logged.decide_batch(
                    {}, [{"metadata": {"name": "n1"}}], target_kind="node", operation="s", time=""
                )
        engine.down = False
        clock.advance(1.0)
        await logged.decide({})
        await logged.decide({})
        await logged.aclose()

    with caplog.at_level(logging.INFO):
        asyncio.run(calls())
    assert outage_lines(caplog) == [
        (
            "WARNING",
            "policy engine http://opa:8181 is failing: cannot connect to http://opa:8181 (connection refused); "
            "pods that need its decisions wait for it (or pass unchecked, with failurePolicy: Ignore)",
        ),
        ("WARNING", "policy engine http://opa:8181 answers again after 25.5 s and 50 failed call(s)"),
    ]
    assert engine.closed


def test_a_flapping_engine_reports_at_most_one_outage_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = VirtualClock(1000.0)
    engine = FlakyEngine()
    logged = OutageLog(engine, clock, "embedded")

    async def flap(times: int, every: float) -> None:
        for _ in range(times):
            engine.down = True
            with pytest.raises(PolicyError):
                await logged.decide({})
            engine.down = False
            clock.advance(every)
            await logged.decide({})

    with caplog.at_level(logging.INFO):
        asyncio.run(flap(10, 1.0))  # ten outages within ten seconds: the first is reported, start and end
        clock.advance(OUTAGE_REPORT_INTERVAL)
        asyncio.run(flap(1, 1.0))  # the next one, a minute on: reported, with the count of those left out
    lines = outage_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING"] * 4  # start and end, twice
    assert lines[2][1].endswith("(9 more outage(s) since the last report, not reported one by one)")


def test_an_unreachable_opa_keeps_pods_pending_and_says_so_at_the_default_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj().raw for i in range(3)]
    pods = [make_pod(f"p{i}").req(cpu="100m").obj().raw for i in range(5)]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([*nodes, *pods]))
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"filter": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                "pluginConfig": [
                    {
                        "name": "SecurityAuditFilter",
                        # A port nothing listens on: every call is refused at once.
                        "args": {"opaEndpoint": "http://127.0.0.1:9/v1/data/kubernetes/authz", "timeoutSeconds": 1},
                    }
                ],
            }
        ],
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    try:
        code = main(
            ["simulate", "-f", str(tmp_path / "cluster.yaml"), "--config", str(tmp_path / "config.yaml"), "--exit-code"]
        )
    finally:
        logging.getLogger().handlers.clear()
    out, err = capsys.readouterr()
    assert code == 1
    assert "0/5 pods scheduled" in out
    outage = [line for line in err.splitlines() if "policy engine http://127.0.0.1:9" in line]
    assert len(outage) == 1, err
    assert outage[0].startswith("W") and "is failing: " in outage[0]
