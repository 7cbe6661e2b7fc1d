"""A fatal line is reported within a fraction of a second of being written (README), also
when the server takes seconds to exit after it (the real vLLM API server tears its engine
processes down for 3-4 s): the wait does not sit out its grace period once the traceback
has ended."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from firedup.errors import ServerCrashedError
from tests.conftest import sim_deployment
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
