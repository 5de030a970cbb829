"""run_returning hands a coroutine's result back without asyncio.run ever taking its repr (which, for a large
simulation report, cost tens of seconds at exit)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.run_async import run_returning
from kubesched.simulation.run import SimulationReport, simulate
from kubesched.testing.builders import make_node, make_pod


class Expensive:
    reprs = 0

    def __repr__(self) -> str:
        Expensive.reprs += 1
        return "Expensive()"


async def produce() -> Expensive:
    await asyncio.sleep(0)
    return Expensive()


def test_the_result_is_returned_and_never_repr_d() -> None:
    Expensive.reprs = 0
    assert isinstance(run_returning(produce()), Expensive)
    assert Expensive.reprs == 0


def test_a_simulation_report_is_never_repr_d(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    def counting_repr(self: SimulationReport) -> str:
        calls.append(1)
        return "report"

    monkeypatch.setattr(SimulationReport, "__repr__", counting_repr)
    from kubesched.api.manifests import LoadedManifests
    from kubesched.cli.common import load_config, plugin_registry

    registry = plugin_registry()
    manifests = LoadedManifests(nodes=[make_node("n1").obj()], pods=[make_pod("p1").obj()])
    report = simulate(manifests, load_config(None, registry), registry)
    assert [record.result for record in report.records] == ["Scheduled"]
    assert calls == []
