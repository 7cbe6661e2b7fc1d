"""Issue 28 §5: ages and uptimes on one clock. The operator's clock an hour ahead of the node's
(the same as a node an hour behind) must not make a live lock look an hour old (which invites
--force-unlock) nor a server's uptime negative."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable

import pytest

from firedup.node.lock import node_lock
from tests.conftest import REPO
from tests.reliability.helpers import Host

pytestmark = [pytest.mark.ssh]

SKEW_S = 3600
SKEWED_FAB = (  # fab with this machine's clock an hour ahead of the node's
    "import sys, time\n"
    "real = time.time\n"
    f"time.time = lambda: real() + {SKEW_S}\n"
    "from fabric.main import program\n"
    "sys.argv[0] = 'fab'\n"
    "sys.exit(program.run())\n"
)


def skewed(host: Host, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(REPO / ".venv" / "bin" / "python"), "-c", SKEWED_FAB, *host.cli_argv(*args)[1:]]
    return subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL
    )


def test_a_live_lock_and_an_uptime_are_told_on_the_nodes_clock(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    deployed = skewed(host, "deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    status = skewed(host, "status", "--json")
    (entry,) = json.loads(status.stdout)["hosts"]
    assert 0 <= entry["uptime_s"] < 120, status.stdout
    plain = skewed(host, "status")
    assert re.search(r"\bup \d+s\b", plain.stdout) and "up -" not in plain.stdout, plain.stdout
    with node_lock(host.node(), host.spec, "sync-patches"):
        refused = skewed(host, "deploy", "--restart")
        err = refused.stderr
        assert refused.returncode == 11, refused.stdout + err
        ages = [int(a) for a in re.findall(r"\((\d+)s ago\)", err)]
        assert ages and all(age < 60 for age in ages), err
        status = skewed(host, "status", "--json")
        (entry,) = json.loads(status.stdout)["hosts"]
        assert entry["lock"]["age_s"] < 60, status.stdout
