"""Several hosts, one exit rule (docs/exit-codes.md), raised as invoke's Exit by every task."""

from __future__ import annotations

import pytest
from invoke.exceptions import Exit

from firedup.errors import ConnectError, NotReadyError, ServerCrashedError, StartError
from firedup.ops.results import HostResults
from tasks.common import exit_by_rule, per_host


def test_all_succeeded_is_zero_and_keeps_host_order() -> None:
    results = HostResults({"b": 1, "a": 2})
    assert list(results) == ["b", "a"] and results["a"] == 2
    assert results.exit_code == 0 and results.codes() == {} and results.errors == {}
    exit_by_rule(results)  # nothing raised


def test_failures_sharing_a_code_exit_with_it() -> None:
    results = HostResults({"a": 1, "b": ConnectError("b down"), "c": ConnectError("c down")})
    assert results.exit_code == ConnectError.exit_code == 3
    assert results.summary() == "2 of 3 hosts failed: b, c"


def test_mixed_failures_exit_1() -> None:
    crashed = ServerCrashedError("a: oom")
    results = HostResults({"a": crashed, "b": StartError("b: running"), "c": 0})
    assert results.codes() == {"a": 8, "b": 7}
    assert results.exit_code == 1


def test_a_value_can_fail_by_the_tasks_own_judgement() -> None:
    results = HostResults({"a": "ok", "b": "slow"}).judged(lambda v: 0 if v == "ok" else 9)
    assert results.exit_code == NotReadyError.exit_code and results.summary().endswith(": b")
    both = HostResults({"a": "slow", "b": ConnectError("x")}, lambda v: 9)
    assert both.exit_code == 1  # a bad answer and an unreachable host are different failures


def test_the_rule_is_raised_as_invokes_exit_naming_the_failed_hosts() -> None:
    def work(name: str) -> str:
        if name == "y":
            raise ConnectError("y: unreachable")
        return name

    results = per_host(["x", "y", "z"], work)
    assert isinstance(results, HostResults) and results["x"] == "x"
    with pytest.raises(Exit) as caught:
        exit_by_rule(results)
    assert caught.value.code == 3
    assert caught.value.message == "firedup: 1 of 3 hosts failed: y"
