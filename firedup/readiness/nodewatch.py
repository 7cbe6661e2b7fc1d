"""The watch: keeps a ready server serving, on the node, long after the SSH session ended.

Started detached in its own session next to the server (firedup/node/sh/watch_start.sh), by
a deploy that reached ready, and shipped like the log reader (firedup.readiness.shipping):
stdlib and firedup.logscan only, Python 3.8. Every `every_s` it checks the run: its leader
and its session's processes, the port held by one of them, /health from the node, the log
after ready (the classifier's fatal lines: evidence for the reason, not a trigger: servers log
tracebacks of single failed requests and go on), and, when asked, one real generation every N
minutes. What it sees goes to `<rundir>/watch.json` (docs/operations.md), where `fab status`
reads it.

When the run dies (or hangs, loses its health, a worker dies) it decides by reason
(firedup.readiness.keep_policy): restart a transient death in a new run directory under the
node's lock, leave a deterministic one alone and say why, give up after `max` failed attempts
in a row. With restart off, a live server's problems are said once and watched on. A TERM
(`fab stop`, a deploy) ends it between two steps: a start under way is finished first, so the
one who ended the watch finds that run in `current` and stops it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

from firedup.readiness import keep_policy as policy
from firedup.readiness import nodewatch_act as act
from firedup.readiness import nodewatch_checks as checks
from firedup.readiness.nodewatch_report import Reporter
from firedup.readiness.nodewatch_run import Run, hint

STARTING_EVERY_S = 1.0  # how often a restarted run is looked at until it is ready
MAX_RESTARTS_KEPT = 20
GENERATE_TIMEOUT_S = 20.0  # one token; a TERM waits for it (watch_end.sh allows 30 s)
LOST_CHECKS = 2  # a worker gone at this many checks in a row is dead, not a blink
Found = tuple  # (reason, detail): a death, or a live server's problem


class Watch:
    def __init__(self, workdir: str, cfg: dict[str, Any], secrets_text: str) -> None:
        self.workdir, self.cfg, self.secrets_text = workdir, cfg, secrets_text
        self.out = Reporter(workdir, cfg, secrets_text)
        self.ending = threading.Event()
        self.every_s = float(cfg.get("every_s") or 10.0)
        self.restart: dict[str, Any] | None = cfg.get("restart")
        self.attempt = 0  # failed restart attempts in a row
        self.restarts: list[dict[str, Any]] = []
        self.state = "watching"
        self.death: dict[str, Any] | None = None
        self.message = ""
        self.my_start = (checks.stat_fields(os.getpid()) or [""] * 20)[19]
        self.run = self.new_run(str(cfg["run_id"]), from_end=True)

    def new_run(self, run_id: str, from_end: bool) -> Run:
        return Run(self.workdir, run_id, str(self.cfg.get("engine") or ""), from_end)

    def main(self) -> int:
        self.became_ready(restarted=False)
        while not self.ending.is_set():
            found = self.look_starting() if self.state == "starting" else self.look_ready()
            if found is not None and self.after_death(*found):
                break
            self.write_state()
            self.ending.wait(STARTING_EVERY_S if self.state == "starting" else self.every_s)
        if self.ending.is_set() and self.state not in ("gave-up", "not-restarted"):
            self.state, self.message = "ended", "the watch was ended (fab stop or a deploy)"
            self.write_state()
        self.out.log(self.message)
        self.out.close(ended=self.state == "ended")
        return 0

    # -- looking --------------------------------------------------------------------------

    def look_ready(self) -> Found | None:
        """(reason, detail) when the ready run died, or has a problem a restart should cure."""
        run = self.run
        alive = run.alive()
        run.read_log()
        if not alive:
            return self.died(run)
        members = checks.session_members(run.pid or 0)
        run.members0 = run.members0 or members
        lost = run.members0 - members
        run.lost_checks = run.lost_checks + 1 if lost else 0
        port = checks.holds_port(members, int(self.cfg["port"]))
        code = self.health()
        run.health_fails = 0 if code == 200 else run.health_fails + 1
        run.checks = checks.check_map(len(members), len(lost), port, code, run.health_fails)
        run.checks["fatal"] = run.fatal()
        self.maybe_generate(run)
        problem = self.problem(run, lost, port, code)
        if problem is not None and not run.alive():
            return self.died(run)  # it died during this check: that is what it found
        if problem is None:
            run.problem_told = ""
            answer = "healthy" if code == 200 else "health %s" % (code or "no answer")
            self.message = "watching run %s: %s" % (run.run_id, answer)
            self.maybe_reset(run)
            return None
        if self.restart:
            return problem
        if run.problem_told != problem[0]:  # restart off: said once, then watched on
            run.problem_told = problem[0]
            self.out.notify("health-lost", "%s: %s" % problem, run.run_id, problem[0])
        self.message = "run %s: %s (%s); restart is off" % (run.run_id, problem[0], problem[1])
        return None

    def died(self, run: Run) -> Found:
        run.read_to_end()
        gone = len(run.members0 - {run.pid}) if run.lost_checks else 0
        reason = policy.reason_of_death(run.fatal(), gone, run.health_told)
        return reason, "the server's process (pid %s) is gone" % run.pid

    def problem(self, run: Run, lost: set[int], port: bool, code: int) -> Found | None:
        if run.lost_checks >= LOST_CHECKS:
            return policy.WORKER_DIED, "pids %s of the run are gone" % sorted(lost)
        if run.health_fails >= int(self.cfg.get("health_fails") or 3):
            reason = policy.HANG if code == 0 else policy.HEALTH_LOST
            detail = "/health: %s at %d checks in a row" % (code or "no answer", run.health_fails)
            if not run.health_told and self.restart:
                self.out.notify("health-lost", detail, run.run_id, reason)
            run.health_told = True
            return reason, detail
        run.health_told = run.health_told and code != 200
        if not port and run.health_fails:
            return policy.PORT_LOST, "no process of the run listens on port %s" % self.cfg["port"]
        if run.gen_fails >= 2:
            return policy.GENERATE_FAILED, str(run.checks.get("generate"))
        return None

    def look_starting(self) -> Found | None:
        run = self.run
        alive = run.alive()
        run.read_log()
        if alive and run.ready_line() and self.health() == 200:
            self.state, run.ready_at = "watching", time.time()
            self.became_ready(restarted=True)
            return None
        if not alive:
            run.read_to_end()
            return run.fatal() or "killed", "the restarted run exited before ready"
        timeout = float(self.cfg.get("ready_timeout_s") or 1800)
        if time.monotonic() - run.started_at > timeout:
            return policy.NOT_READY, "not ready after %.0fs" % timeout
        self.message = "run %s is starting (%s)" % (run.run_id, run.scanner.state.phase.value)
        return None

    def health(self) -> int:
        """The ready run's liveness: the engine's cheap check (watch.LIVENESS), or /health."""
        live = str(self.cfg.get("live_url") or "")
        url = live or str(self.cfg.get("health_url") or "")
        if not url:
            return 200  # nothing to ask: the process and the port decide
        code = checks.health(url, float(self.cfg.get("health_timeout_s") or 5.0))
        if live and code == 404:  # this release has no such check: /health from now on
            self.cfg["live_url"] = ""
            return self.health()
        return code

    def maybe_generate(self, run: Run) -> None:
        every = float(self.cfg.get("generate_every_min") or 0) * 60
        if not every or time.monotonic() - run.gen_at < every:
            return
        run.gen_at = time.monotonic()
        base, model = str(self.cfg.get("base_url")), str(self.cfg.get("model") or "")
        ok, ms, why = checks.generate(base, model, GENERATE_TIMEOUT_S)
        run.gen_fails = 0 if ok else run.gen_fails + 1
        run.checks["generate"] = {"at": time.time(), "ok": ok, "ms": round(ms), "error": why}

    def maybe_reset(self, run: Run) -> None:
        stable = float((self.restart or {}).get("reset_after_s") or 600)
        if self.attempt and run.ready_at and time.time() - run.ready_at >= stable:
            self.out.log("run %s served %.0fs: restarts count from 0 again" % (run.run_id, stable))
            self.attempt = 0

    # -- deaths and restarts ----------------------------------------------------------------

    def after_death(self, reason: str, detail: str) -> bool:
        """Decide and act on a death; True when the watch is done."""
        run = self.run
        what, why = policy.decide(reason, run.ready_at is not None, self.restart, self.attempt)
        excerpt = [self.out.mask(line) for line in run.excerpt()]
        said = hint(reason)
        self.death = {
            "at": time.time(),
            "reason": reason,
            "detail": self.out.mask(detail),
            "hint": said,
            "restart": what == "restart",
            "why": why,
            "excerpt": excerpt,
        }
        self.out.history("watch", "failed", run.run_id, "%s (%s)" % (why, detail), said)
        text = "run %s failed: %s. %s" % (run.run_id, why, said)
        self.out.notify("failed", text, run.run_id, reason, hint=said, decision=what,
                        excerpt="\n".join(excerpt))  # fmt: skip
        if what == "restart":
            return self.restart_after(run, reason, why)
        self.state, self.message = what, why
        if what == "gave-up" or self.restart:
            self.out.notify(what, why, run.run_id, reason)
        self.write_state()
        return True

    def restart_after(self, old: Run, reason: str, why: str) -> bool:
        """Back off, then take the node's lock (waiting while someone else holds it)."""
        self.state, self.message = "backoff", why
        self.write_state()
        self.ending.wait(float((self.restart or {}).get("backoff_s") or 0))
        while not self.ending.is_set():
            lock = act.Lock(self.out.script("lock_hold"), self.workdir, "restart", old.run_id)
            if lock.held:
                try:
                    return self.start_new(old, reason)
                finally:
                    lock.release()
            self.message = "waiting for the node's lock to restart: %s" % lock.busy
            self.write_state()
            self.ending.wait(self.every_s)
        return False

    def start_new(self, old: Run, reason: str) -> bool:
        """Under the lock: a new run of the same launch.sh. True when the watch is done."""
        current = os.path.basename(os.path.realpath(os.path.join(self.workdir, "current")))
        if current != old.run_id:  # someone deployed meanwhile: theirs is the slot now
            self.state = "ended"
            self.message = "run %s is current now, not %s: not restarting" % (current, old.run_id)
            return True
        if old.alive():  # hung or degraded: the new run needs its port and its GPUs
            act.bash(self.out.script("stop"), "stop", old.dir, "20", timeout_s=90)
        new_id = act.new_run_id()
        act.copy_run(self.workdir, old.run_id, new_id, self.secrets_text)
        started = act.bash(self.out.script("start"), "start", self.workdir, new_id)
        self.attempt += 1
        limit = int((self.restart or {}).get("max") or 0)
        note = "after %s in run %s (attempt %d of %d)" % (reason, old.run_id, self.attempt, limit)
        detail = self.death["detail"] if self.death else ""
        entry = {"at": time.time(), "from_run": old.run_id, "to_run": new_id, "reason": reason,
                 "detail": detail}  # fmt: skip
        self.restarts = [*self.restarts, entry][-MAX_RESTARTS_KEPT:]
        self.state, self.message = "replaced", "restarted as run %s %s" % (new_id, note)
        self.write_state()
        self.run = self.new_run(new_id, from_end=False)
        self.state, self.message = "starting", "run %s started %s" % (new_id, note)
        ok = started.get("pid", "").isdigit()
        error = "" if ok else started.get("_err", "")
        self.out.history("restart", "started" if ok else "failed", new_id, note, error)
        text = "restarted run %s as %s %s" % (old.run_id, new_id, note)
        self.out.notify("restarted", text, new_id, reason)
        self.write_state()
        return False

    def became_ready(self, restarted: bool) -> None:
        run = self.run
        self.message = "watching run %s: ready" % run.run_id
        if restarted:
            last = self.restarts[-1] if self.restarts else {}
            note = "after %s in run %s" % (last.get("reason", "?"), last.get("from_run", "?"))
            self.out.history("restart", "ready", run.run_id, note, "")
        text = "run %s is ready%s" % (run.run_id, " (restarted)" if restarted else "")
        self.out.notify("ready", text, run.run_id, "")
        self.write_state()

    def write_state(self) -> None:
        """`<rundir>/watch.json`: format in docs/operations.md (fields are only added)."""
        run = self.run
        self.out.write(
            run.dir,
            {
                "v": 1,
                "run_id": run.run_id,
                "watch_pid": os.getpid(),
                "watch_start": self.my_start,
                "state": self.state,
                "checked_at": time.time(),
                "every_s": self.every_s,
                "ready_at": run.ready_at,
                "checks": run.checks,
                "restart": self.restart,
                "attempt": self.attempt,
                "restarts": self.restarts,
                "death": self.death if self.state != "starting" else None,
                "message": self.message,
            },
        )


def main(argv: list[str]) -> int:
    """argv: the marker `firedup-watch`, then WORKDIR. Reads WORKDIR/watch/config.json, and
    WORKDIR/watch/secrets.env once (then removes it: the secrets stay in this memory only)."""
    workdir = argv[1]
    home = os.path.join(workdir, "watch")
    with open(os.path.join(home, "config.json")) as fh:
        cfg = json.load(fh)
    secrets_text = ""
    path = os.path.join(home, "secrets.env")
    if os.path.exists(path):
        with open(path) as fh:
            secrets_text = fh.read()
        os.unlink(path)
    watch = Watch(workdir, cfg, secrets_text)
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGHUP stays ignored (nohup)
        signal.signal(sig, lambda *_: watch.ending.set())
    return watch.main()
