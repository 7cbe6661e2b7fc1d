"""After ready (issue 25), the pure parts: restart by reason, the config, what status shows,
and the watch's own code as the node's python 3.8 will read it."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import parse_inventory
from firedup.engine import Engine
from firedup.errors import InventoryError
from firedup.launch.keepalive import WatchView
from firedup.launch.runs import RunMeta
from firedup.logscan import Reason
from firedup.ops.deploy import plan_deploy
from firedup.ops.keep import watch_config
from firedup.readiness import keep_policy as policy
from firedup.readiness.nodewatch_act import Masker, unquote
from firedup.readiness.nodewatch_run import AfterReady
from firedup.readiness.shipping import WATCH_ENTRY, bundle

RESTART = {"on": "failure", "max": 2}


@pytest.mark.parametrize(
    "reason",
    ["killed", "nccl", "crash", "fatal_python_error", policy.HANG, policy.HEALTH_LOST,
     policy.WORKER_DIED, policy.PORT_LOST, "oom"],
)  # fmt: skip
def test_a_transient_death_after_ready_is_restarted(reason: str) -> None:
    what, why = policy.decide(reason, True, RESTART, 0)
    assert what == "restart" and "attempt 1 of 2" in why


@pytest.mark.parametrize(
    "reason",
    ["bad_args", "model_not_found", "context_length", "missing_model_hook",
     "unsupported_model"],
)  # fmt: skip
def test_a_deterministic_death_is_never_restarted_and_says_so(reason: str) -> None:
    for ready_before in (True, False):
        what, why = policy.decide(reason, ready_before, RESTART, 0)
        assert what == "not-restarted" and "deterministic" in why and reason in why


def test_oom_is_deterministic_only_while_loading() -> None:
    assert policy.decide("oom", False, RESTART, 1)[0] == "not-restarted"
    assert policy.decide("oom", True, RESTART, 1)[0] == "restart"


def test_every_reason_the_classifier_names_is_sorted_one_way_or_the_other() -> None:
    """A new Reason must be decided on purpose: transient or in DETERMINISTIC."""
    named = {r.value for r in Reason}
    assert named >= policy.DETERMINISTIC | policy.LOADING_ONLY


def test_max_failed_attempts_in_a_row_give_up_and_restart_off_restarts_nothing() -> None:
    assert policy.decide("killed", True, RESTART, 2)[0] == "gave-up"
    assert "gave up after 2" in policy.decide("crash", True, RESTART, 2)[1]
    assert policy.decide("killed", True, None, 0)[0] == "not-restarted"
    assert policy.decide("killed", True, {"on": "never", "max": 3}, 0)[0] == "not-restarted"


def test_the_reason_of_a_death_prefers_the_log_then_what_the_watch_saw() -> None:
    assert policy.reason_of_death("nccl", 1, True) == "nccl"
    assert policy.reason_of_death(None, 1, True) == policy.WORKER_DIED
    assert policy.reason_of_death(None, 0, True) == policy.HEALTH_LOST
    assert policy.reason_of_death(None, 0, False) == "killed"


def _inventory(**deployment: Any) -> Any:
    return parse_inventory(
        {
            "hosts": {"n": {"address": "gpu", "workdir": "/srv/fd", "deployment": "d"}},
            "deployments": {"d": {"engine": "sglang", "model": "/m", **deployment}},
        },
        Path("hosts.yaml"),
    )


def test_restart_is_validated_once_at_load() -> None:
    with pytest.raises(InventoryError, match=r"deployments\.d\.restart\.on"):
        _inventory(restart={"on": "always"})
    with pytest.raises(InventoryError, match=r"deployments\.d\.restart\.max"):
        _inventory(restart={"on": "failure", "max": 0})
    with pytest.raises(InventoryError, match="http:// or https://"):
        _inventory(notify={"webhook": "ftp://x.example/hook"})
    with pytest.raises(InventoryError, match=r"restart\.backof_s: unknown key"):
        _inventory(restart={"on": "failure", "backof_s": 3})  # a typo is refused, not ignored
    inv = _inventory(restart={"on": "failure", "max": 3, "backoff_s": 30})
    assert inv.deployments["d"].restart.max == 3 and inv.deployments["d"].watched


def test_the_inventory_notify_is_every_host_default() -> None:
    inv = parse_inventory(
        {
            "notify": {"webhook": "https://hooks.example/T0"},
            "hosts": {
                "a": {"address": "gpu", "workdir": "/srv/a", "deployment": "d"},
                "b": {"address": "gpu", "workdir": "/srv/b", "deployment": "d",
                      "notify": {"webhook": "https://other.example/T1"}},
            },
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        Path("hosts.yaml"),
    )  # fmt: skip
    assert inv.hosts["a"].notify.webhook == "https://hooks.example/T0"
    assert inv.hosts["b"].notify.webhook == "https://other.example/T1"


def test_the_watch_config_has_what_a_restart_needs_without_the_operator() -> None:
    inv = _inventory(restart={"on": "failure", "max": 2}, notify={"webhook": "https://h.x/T"})
    host = inv.hosts["n"]
    plan = plan_deploy(host, inv.deployments["d"], run_id="20261201T000000Z-abcdef")
    run = RunMeta(plan.run_id, "n", "d", Engine.SGLANG, 30000, "/srv/fd", "x", 0.0, "me")
    cfg = watch_config(plan, run)
    assert set(cfg["scripts"]) == {"start", "stop", "lock_hold", "history_append"}
    assert cfg["restart"]["max"] == 2 and cfg["notify"]["webhook"] == "https://h.x/T"
    assert cfg["health_url"] == "http://127.0.0.1:30000/health"
    assert "action" not in cfg["history"] and cfg["history"]["deployment"] == "d"
    json.dumps(cfg)  # it goes to the node as JSON


def test_status_words_for_the_watch() -> None:
    on = WatchView.from_json(
        json.dumps({"state": "watching", "checked_at": 100.0, "every_s": 10,
                    "restarts": [{"reason": "killed"}], "message": "ok"})
    )  # fmt: skip
    assert on.text(104.0) == "watch on (watching, checked 4s ago); 1 restart(s): killed"
    gone = WatchView.from_json(json.dumps({"state": "gave-up", "message": "gave up after 2"}))
    assert gone.text(0) == "watch off (gave-up: gave up after 2)" and not gone.on
    assert (
        not WatchView.from_json(json.dumps({"state": "watching"}))
        .__class__(**{**vars(on), "alive": False})
        .on
    )


def test_a_dying_servers_cause_is_read_through_its_traffic() -> None:
    after = AfterReady("sglang")
    after.feed(b'[2026-12-01 10:00:00] INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK\n')
    after.feed(b"[2026-12-01 10:00:01] Prefill batch, #new-seq: 1, #new-token: 1\nTraceback (mo")
    after.feed(b'st recent call last):\n  File "x.py", line 1, in f\n')
    after.feed(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    after.finish()
    assert after.fatal() == "oom"


def test_the_mask_knows_the_secrets_as_the_launch_file_quotes_them() -> None:
    mask = Masker("HF_TOKEN='hf_it'\"'\"'s-secret'\nOTHER=plainvalue\n", ["https://h.x/T0K"])
    assert unquote("'a'\"'\"'b'") == "a'b"
    assert mask("x hf_it's-secret y plainvalue https://h.x/T0K") == "x *** y *** ***"


def test_the_watch_parses_as_python_3_8_and_imports_only_the_stdlib() -> None:
    for name, (_, source) in bundle(WATCH_ENTRY).items():  # bundle() refuses non-stdlib
        ast.parse(source, filename=name, feature_version=(3, 8))


def test_a_watched_deployment_in_a_container_is_refused_at_load() -> None:
    with pytest.raises(InventoryError, match=r"in a container \(podman\) is not watched yet"):
        _inventory(restart={"on": "failure"}, runtime="podman", image="lmsysorg/sglang:v0.5.9")
