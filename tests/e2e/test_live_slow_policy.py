"""A slow policy engine does not stall the Lease: renewals go on while SecurityAuditFilter waits for OPA.

The scheduling cycle awaits the policy decision off the event loop's critical path, so the leader elector, the
informers and the writers keep running. Here the OPA server holds the first decision until the Lease has been
renewed three times while it waits (retryPeriod 0.5 s, renewDeadline 2 s): a cycle that blocked the loop would
renew nothing, the answer would never come, and leadership would be lost.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.harness.envtest import ControlPlane
from kubesched.harness.opa_server import OpaTestServer
from kubesched.testing.live_cluster import RunningScheduler, scenario, wait_for

pytestmark = pytest.mark.e2e

POLICIES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def test_lease_renewals_continue_while_decisions_take_two_seconds(control_plane: ControlPlane, tmp_path: Path) -> None:
    with scenario(control_plane, tmp_path) as corner:
        nodes = [f"n{i}-{corner.tag}" for i in range(2)]
        for i in range(2):
            corner.create(corner.node(f"n{i}"))
        data = json.loads((POLICIES / "data.json").read_text())
        data["compliance"]["nodes"] = {name: {"level": "standard", "scanned": "2026-11-29T09:00:00Z"} for name in nodes}
        policies = {"placement.rego": (POLICIES / "placement.rego").read_text()}
        with OpaTestServer(policies, data) as opa:
            release = threading.Event()
            opa.faults.hold = release
            config = corner.config(
                leaderElection={
                    "leaderElect": True,
                    "leaseDuration": "3s",
                    "renewDeadline": "2s",
                    "retryPeriod": "500ms",
                    "resourceName": "kubesched-slow-policy",
                    "resourceNamespace": corner.namespace,
                },
                profiles=[
                    {
                        "schedulerName": corner.scheduler_name,
                        "plugins": {"multiPoint": {"enabled": [{"name": "SecurityAuditFilter"}]}},
                        "pluginConfig": [
                            {
                                "name": "SecurityAuditFilter",
                                "args": {"opaEndpoint": f"{opa.url}/v1/data/kubernetes/authz", "timeoutSeconds": 5},
                            }
                        ],
                    }
                ],
            )
            renewed_while_held: list[str] = []
            watching = threading.Event()

            def watch_lease() -> None:
                path = f"/apis/coordination.k8s.io/v1/namespaces/{corner.namespace}/leases/kubesched-slow-policy"
                last = ""
                while not watching.is_set():
                    status, lease = control_plane.request("GET", path)
                    renew = str(lease["spec"].get("renewTime", "")) if status == 200 else ""
                    if renew and renew != last:
                        if last and opa.requests > opa.answered:  # renewed while a decision is held
                            renewed_while_held.append(renew)
                            if len(renewed_while_held) >= 3:
                                release.set()
                        last = renew
                    time.sleep(0.05)

            async def scenario_run() -> None:
                async with RunningScheduler(corner, config, user="admin") as live:
                    assert live.elector is not None and live.elector.is_leader
                    watcher = threading.Thread(target=watch_lease)
                    watcher.start()
                    try:
                        for i in range(3):  # distinct images: no cached decision, one call each
                            pod: dict[str, Any] = corner.pod(f"p{i}", cpu="100m")
                            pod["spec"]["containers"][0]["image"] = f"nginx:1.{i}"
                            corner.create(pod)
                        await wait_for(
                            lambda: sum(bool(p["spec"].get("nodeName")) for p in corner.pods().values()) == 3, 60
                        )
                        assert live.elector.is_leader
                    finally:
                        watching.set()
                        await asyncio.to_thread(watcher.join)

            asyncio.run(scenario_run())
            assert opa.requests >= 3  # every pod was decided by the server
        assert len(renewed_while_held) >= 3, renewed_while_held
