from __future__ import annotations

import pytest

from kubesched.framework.status import Code, Status
from kubesched.scheduler.algorithm import num_feasible_nodes_to_find
from kubesched.scheduler.diagnosis import Diagnosis, fit_error_message, truncate_event_message


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        pytest.param(0, 10, 10, id="fewer-than-100-nodes-all"),
        pytest.param(0, 99, 99, id="99-nodes-all"),
        pytest.param(0, 100, 100, id="100-nodes-50-percent-floored-at-100"),
        pytest.param(0, 1000, 420, id="1000-nodes-42-percent"),
        pytest.param(0, 5000, 500, id="5000-nodes-10-percent"),
        pytest.param(0, 6000, 300, id="6000-nodes-floor-5-percent"),
        pytest.param(0, 15000, 750, id="15000-nodes-5-percent"),
        pytest.param(50, 1000, 500, id="explicit-50-percent"),
        pytest.param(1, 1000, 100, id="explicit-1-percent-floored-at-100"),
        pytest.param(100, 5000, 5000, id="explicit-100-percent"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_fit_error_message_sorts_histogram_as_strings_and_counts_each_reason() -> None:
    fit = Status(Code.UNSCHEDULABLE, "Insufficient cpu", "Insufficient memory", plugin="NodeResourcesFit")
    taint = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint {dedicated: gpu}")
    cpu = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    statuses = {f"n{i}": cpu for i in range(10)} | {"a": fit, "b": fit, "t": taint}
    message = fit_error_message(13, Diagnosis(node_to_status=statuses))
    assert message == (
        "0/13 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "12 Insufficient cpu, 2 Insufficient memory."
    )


def test_fit_error_message_string_sort_puts_10_before_2() -> None:
    statuses = {f"c{i}": Status(Code.UNSCHEDULABLE, "Insufficient cpu") for i in range(10)}
    statuses |= {f"m{i}": Status(Code.UNSCHEDULABLE, "Too many pods") for i in range(2)}
    statuses |= {f"x{i}": Status(Code.UNSCHEDULABLE, "Insufficient memory") for i in range(2)}
    message = fit_error_message(14, Diagnosis(node_to_status=statuses))
    assert message == "0/14 nodes are available: 10 Insufficient cpu, 2 Insufficient memory, 2 Too many pods."


def test_fit_error_message_prefilter_and_postfilter() -> None:
    diagnosis = Diagnosis(pre_filter_msg="pod affinity terms conflict", post_filter_msg="preemption: not eligible")
    assert fit_error_message(3, diagnosis) == (
        "0/3 nodes are available: pod affinity terms conflict. preemption: not eligible."
    )


def test_fit_error_message_counts_absent_nodes() -> None:
    diagnosis = Diagnosis(
        node_to_status={"a": Status(Code.UNSCHEDULABLE, "Insufficient cpu")},
        absent_nodes_status=Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't satisfy plugin(s) [NodeAffinity]"
        ),
        absent_node_count=4,
    )
    assert fit_error_message(5, diagnosis) == (
        "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_event_message_truncated_to_1024() -> None:
    assert truncate_event_message("x" * 1024) == "x" * 1024
    long = truncate_event_message("y" * 2000)
    assert len(long) == 1024 and long.endswith(" ...") and long.startswith("y" * 1020)
