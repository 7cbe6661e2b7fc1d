"""Starting the node-side watch after a deploy reached ready (docs/operations.md).

Everything the watch needs to restart the server without the operator goes to the node here,
once: `<workdir>/watch/config.json` (the deployment's restart/notify/watch settings, the node
scripts it runs, the history record's fixed fields), the deployment's secrets (0600; the watch
reads them into memory and removes the file) and its code (firedup.readiness.shipping). The
watch then re-launches the very launch.sh this deploy rendered, in a new run directory.
Notifications are sent from the node, by the watch: the operator's laptop is closed at 3 a.m.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from typing import Any

from firedup.config.secrets import resolve_secrets, secrets_env_text
from firedup.errors import DeployError
from firedup.launch.keepalive import end_watch
from firedup.launch.render import launch_env
from firedup.launch.runs import RunMeta
from firedup.node.base import Node, parse_fields, run_script, script_text
from firedup.ops.deploy import DeployPlan
from firedup.ops.history import Action, Outcome, run_record
from firedup.ops.repo import inventory_commit
from firedup.readiness.shipping import WATCH_BOOT, watch_code
from firedup.readiness.watch import health_url, live_url

WATCH_DIR = "watch"
SCRIPTS = ("start", "stop", "lock_hold", "history_append")
# Fields of a history record the watch fills in itself, per event.
PER_EVENT = ("action", "outcome", "at", "who", "run_id", "reason", "detail", "phases")


def watch_config(plan: DeployPlan, run: RunMeta) -> dict[str, Any]:
    """What the watch reads at its start (pure: tested on its own)."""
    deployment, host = plan.deployment, plan.host
    watch = deployment.watch
    notify = deployment.notify or host.notify
    base = run_record(
        Action.WATCH,
        Outcome.FAILED,
        run,
        env=launch_env(host, deployment),
        secret_keys=deployment.secrets,
        patches=deployment.patches,
        engine_version=run.engine_version or "",
        commit=inventory_commit(host),
    ).to_json()
    return {
        "run_id": run.run_id,
        "host": host.name,
        "deployment": deployment.name,
        "engine": deployment.engine.value,
        "port": deployment.port,
        "health_url": health_url(run),
        "live_url": live_url(run),  # asked in its place once ready (watch.LIVENESS)
        "base_url": health_url(run).removesuffix("/health"),
        "model": deployment.model,
        "ready_timeout_s": deployment.ready_timeout_s,
        "every_s": watch.every_s if watch else 10.0,
        "health_fails": watch.health_fails if watch else 3,
        "health_timeout_s": watch.health_timeout_s if watch else 5.0,
        "generate_every_min": watch.generate_every_min if watch else 0.0,
        "restart": deployment.restart.model_dump() if deployment.restart else None,
        "notify": {"webhook": notify.webhook, "events": list(notify.events)} if notify else None,
        "scripts": {name: script_text(name) for name in SCRIPTS},
        "history": {k: v for k, v in base.items() if k not in PER_EVENT},
    }


def start_watch(
    node: Node, plan: DeployPlan, run: RunMeta, on_progress: Callable[[str], None]
) -> int | None:
    """Start the slot's watch for `run` (ready), replacing any watch of the slot. A watch that
    cannot start never fails the deploy: the server serves; the warning says what is missing."""
    if not plan.deployment.watched:
        return None
    home = posixpath.join(plan.host.workdir, WATCH_DIR)
    try:
        end_watch(node, plan.host)
        config = json.dumps(watch_config(plan, run), sort_keys=True).encode()
        node.put(config, posixpath.join(home, "config.json"), mode=0o600)
        secrets = resolve_secrets(plan.deployment)
        if secrets:
            text = secrets_env_text(secrets).encode()
            node.put(text, posixpath.join(home, "secrets.env"), mode=0o600)
        code = posixpath.join(home, "code.z")
        node.put(watch_code(), code, mode=0o600)
        out = run_script(
            node,
            "watch_start",
            plan.host.workdir,
            plan.host.python,
            WATCH_BOOT,
            code,
            what="start the watch",
        ).out
    except DeployError as exc:
        on_progress(f"warning: the watch did not start ({exc}); the server runs unwatched")
        return None
    pid = parse_fields(out).get("pid", "")
    on_progress(f"watch started (pid {pid}): {_what(plan)}")
    return int(pid) if pid.isdigit() else None


def _what(plan: DeployPlan) -> str:
    restart = plan.deployment.restart
    parts = [
        f"restart on failure, max {restart.max}, backoff {restart.backoff_s:g}s"
        if restart and restart.on == "failure"
        else "no restart"
    ]
    if plan.deployment.notify or plan.host.notify:
        parts.append("notify by webhook")
    return "; ".join(parts)
