"""A fatal line is reported within a fraction of a second of being written (README), also
when the server takes seconds to exit after it (the real vLLM API server tears its engine
processes down for 3-4 s): the wait does not sit out its grace period once the traceback
has ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from firedup.errors import ServerCrashedError
from tests.conftest import Sshd, fab, sim_deployment, ssh_host, stop_runs
from tests.ssh.test_readiness import Node, make_node  # noqa: F401 - the fixture

pytestmark = pytest.mark.ssh


def test_a_fatal_line_is_reported_at_once_while_the_server_lingers(
    make_node: Callable[..., Node],  # noqa: F811
) -> None:
    node = make_node(
        sim_deployment(engine="vllm", tp=2),
        FIREDUP_SIM_FAULT="rank_killed",
        FIREDUP_SIM_EXIT_DELAY_S="6",
    )
    run = node.start()
    with pytest.raises(ServerCrashedError) as err:
        node.wait(run)
    noticed = time.time()
    lag = noticed - node.sim_event("crashed")
    assert "phase" in str(err.value)
    assert lag < 1.0, f"the fatal line was reported {lag:.2f}s after it was written"


@pytest.mark.parametrize(
    ("linger_s", "told"), [("2", "exited by themselves"), ("60", "still running")]
)
def test_after_the_verdict_it_is_told_whether_the_failed_server_exits_by_itself(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path], linger_s: str, told: str
) -> None:
    """The real vLLM logs its fatal lines, then tears its engine down for seconds: a verdict
    that says "`fab stop` it" at once was wrong about most of them (issue 21). The verdict
    stays immediate; what the processes then did is one line after it."""
    host = ssh_host(sshd, tmp_path / "node", "d")
    host["env"] = {
        **host["env"],
        "FIREDUP_SIM_SPEED": "4",
        "FIREDUP_SIM_FAULT": "rank_killed",
        "FIREDUP_SIM_EXIT_DELAY_S": linger_s,
    }
    inv = write_inventory({"n": host}, {"d": sim_deployment(engine="vllm", tp=2)})
    try:
        done = fab("deploy", "--host", "n", "--inventory", str(inv), "--plain", timeout_s=120)
    finally:
        stop_runs(inv)
    assert done.returncode == 8, done.stderr
    assert "still alive when it was read" in done.stderr
    assert told in done.stderr, done.stderr
    if told == "exited by themselves":
        assert "fab stop" not in done.stderr
    else:
        assert "`fab stop --host n` ends it" in done.stderr
