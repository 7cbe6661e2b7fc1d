"""What the watch tells: `<rundir>/watch.json`, history lines, webhook events, its own log.
Every text passes the mask first (the secrets the watch holds, the webhook's URL).
Stdlib, Python 3.8 (shipped with the watch: firedup.readiness.nodewatch).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from firedup.readiness import nodewatch_act as act

MAX_TEXT = 2000


class Reporter:
    def __init__(self, workdir: str, cfg: dict[str, Any], secrets_text: str) -> None:
        self.workdir, self.cfg = workdir, cfg
        webhook = str((cfg.get("notify") or {}).get("webhook") or "")
        self.mask = act.Masker(secrets_text, [webhook] if webhook else [])
        self.notifier = act.Notifier(cfg.get("notify"), self.mask, self.log)

    def script(self, name: str) -> str:
        return str(self.cfg["scripts"][name])

    def log(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sys.stdout.write("%s %s\n" % (stamp, self.mask(text)))
        sys.stdout.flush()

    def write(self, rundir: str, data: dict[str, Any]) -> None:
        data = dict(data, message=self.mask(str(data.get("message") or "")))
        try:
            act.write_json(os.path.join(rundir, "watch.json"), data)
        except OSError as exc:  # a full disk: the watch goes on, status shows an old check
            self.log("cannot write watch.json: %s" % exc)

    def history(self, action: str, outcome: str, run_id: str, reason: str, detail: str) -> None:
        """One line in the node's history (docs/history.md), `who` = watch@<node>."""
        line = act.history_line(
            dict(self.cfg.get("history") or {}),
            action=action,
            outcome=outcome,
            run_id=run_id,
            reason=self.mask(reason)[:MAX_TEXT],
            detail=self.mask(detail)[:MAX_TEXT],
        )
        done = act.bash(self.script("history_append"), "history_append", self.workdir, line)
        if done["_rc"] != "0":
            self.log("cannot append to the history: %s" % done["_err"])

    def notify(self, event: str, text: str, run_id: str, reason: str, **extra: Any) -> None:
        """One event to the webhook, queued: the check never waits for the receiver."""
        self.log("%s: %s" % (event, text))
        where = "firedup %s (%s)" % (self.cfg.get("host"), self.cfg.get("deployment"))
        self.notifier.send(
            event,
            "%s: %s" % (where, text),
            host=self.cfg.get("host"),
            deployment=self.cfg.get("deployment"),
            run_id=run_id,
            reason=reason,
            **extra,
        )

    def close(self, ended: bool) -> None:
        self.notifier.close(act.ENDED_FLUSH_S if ended else act.FLUSH_S)
