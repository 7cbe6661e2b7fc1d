"""Issue 16 §6: with the workdir's disk full, `fab stop` (and `--force-unlock`) still stops the
server, and says what it could not record (the lock's record, the history line)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.helpers import Host, leftover_problems
from tests.reliability.test_resources import fill

pytestmark = [pytest.mark.ssh]


@pytest.mark.parametrize("how", [(), ("--force-unlock",)], ids=["stop", "force-unlock"])
def test_a_full_disk_never_keeps_a_server_from_stopping(
    small_disk: Path, make_host: Callable[..., Host], how: tuple[str, ...]
) -> None:
    host = make_host(workdir=small_disk / "node")
    started = host.cli("start")
    assert started.returncode == 0, started.stdout + started.stderr
    ready = host.cli("wait", "--timeout", "30")
    assert ready.returncode == 0, ready.stdout + ready.stderr
    assert host.live_runs()
    history_before = host.history()
    fill(small_disk)
    stopped = host.cli("stop", *how)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output
    assert "stopped" in stopped.stdout and "Traceback" not in output, output
    assert not host.live_runs(), output
    # It says what it could not write down, and why.
    assert "not recorded: the lock's record" in stopped.stdout, output
    assert "No space left" in stopped.stdout, output
    # The history line fits in the file's last, partly used page, or it is said to be missing.
    recorded = host.history()[len(history_before) :]
    if recorded:
        assert [(r["action"], r["outcome"]) for r in recorded] == [("stop", "stopped")]
    else:
        assert "not recorded: the node's history" in stopped.stdout, output
    (small_disk / "filler").unlink()
    assert not leftover_problems(host)
