"""report.md: the numbers of one bench run, with how each was measured."""

from __future__ import annotations

from typing import Any

from bench import router, slowlink, status
from bench.fleet import __doc__ as fleet_doc
from bench.report import fmt, median, ratio, table


def _machine(m: dict[str, Any]) -> str:
    v = m["versions"]
    rows = [
        ["date (UTC)", m["date_utc"]],
        ["CPU", f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gb']} GB"],
        ["kernel / OS", f"{m['kernel']} / {m['os']}"],
        ["python", m["python"]],
        ["firedup", f"{v['firedup']} at {m['firedup_commit']}"],
        ["fabric / invoke / paramiko", f"{v['fabric']} / {v['invoke']} / {v['paramiko']}"],
        ["OpenSSH / bash / tail", f"{v['openssh']} / {v['bash']} / {v['coreutils tail']}"],
        ["Ansible", v["ansible"]],
        [
            "load average (1/5/15 min)",
            f"start {m['load_average_at_start']}, end {m.get('load_average_at_end', '?')}",
        ],
        ["bench wall time", fmt(m.get("bench_wall_s"), " s", 0)],
    ]
    return table(["", ""], rows)


def _latency(rows: list[dict[str, Any]]) -> str:
    out = []
    for case in ("ready", "crash"):
        group = [r for r in rows if r["case"] == case]
        base = next((r["median_s"] for r in group if r["tool"] == "firedup"), None)
        body = []
        for r in group:
            never = f", {r['never_reported']} never" if r["never_reported"] else ""
            body.append(
                [
                    r["tool"],
                    str(r["runs"]),
                    fmt(r["median_s"]),
                    f"{fmt(r['min_s'])} … {fmt(r['max_s'])}{never}",
                    ratio(r["median_s"], base),
                    ", ".join(r["outcomes"]),
                    fmt(r["median_node_cpu_pct"], "%"),
                ]
            )
        headers = [
            "tool",
            "runs",
            "median",
            "min … max",
            "vs firedup",
            "reported",
            "node CPU (median, % of a core)",
        ]
        out.append(f"**{case}**\n\n" + table(headers, body))
    return "\n\n".join(out)


def _steady(samples: list[dict[str, Any]], per_command: dict[str, dict[str, float]]) -> str:
    rows = [
        [
            s["tool"],
            s["login_shell"],
            fmt(s["window_s"], " s", 1),
            fmt(s["node_cpu_s"], " s"),
            fmt(s["node_cpu_pct"], "%"),
            s["outcome"],
        ]
        for s in samples
    ]
    text = table(["tool", "login shell", "window", "node CPU", "% of a core", "ended"], rows)
    cmd_rows = [
        [shell, fmt(v.get("probe_ms"), " ms", 1), fmt(v.get("true_ms"), " ms", 1)]
        for shell, v in per_command.items()
    ]
    return (
        text
        + "\n\nNode CPU per remote command:\n\n"
        + table(["login shell", "one firedup probe (with health)", "one `true`"], cmd_rows)
    )


def _biglog(samples: list[dict[str, Any]]) -> str:
    rows = [
        [
            s["tool"],
            fmt(s["log_bytes"] / 1e6, " MB", 1),
            fmt(s["wire_from_node"] / 1e6, " MB"),
            f"{s['wire_ratio']:.3f}x",
            "—" if s["payload_from_node"] is None else fmt(s["payload_from_node"] / 1e6, " MB"),
            fmt(s["node_cpu_pct"], "%"),
            fmt(s["latency_s"]),
            s["outcome"],
        ]
        for s in samples
    ]
    headers = [
        "tool",
        "log size",
        "wire, node→client",
        "wire / log",
        "payload to firedup",
        "node CPU",
        "ready latency",
        "outcome",
    ]
    return table(headers, rows)


def _e2e(samples: list[dict[str, Any]]) -> str:
    tools: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        tools.setdefault(s["tool"], []).append(s)
    base = median(s["wall_s"] for s in tools.get("fab deploy (CLI)", []))
    rows = []
    for tool, runs in tools.items():
        walls = [r["wall_s"] for r in runs]
        ops = median(r["remote_ops"] for r in runs)
        rows.append(
            [
                tool,
                str(len(runs)),
                fmt(median(walls)),
                f"{fmt(min(walls))} … {fmt(max(walls))}",
                ratio(median(walls), base),
                str(sorted({r["connections"] for r in runs})),
                "—" if ops is None else f"{ops:.0f}",
                fmt(median(r["node_cpu_s"] for r in runs)),
                f"{sum(r['ok'] for r in runs)}/{len(runs)}",
            ]
        )
    headers = [
        "tool",
        "runs",
        "median wall",
        "min … max",
        "vs fab deploy",
        "SSH connections",
        "remote ops",
        "node CPU",
        "ready",
    ]
    return table(headers, rows)


def _fleet_row(
    s: dict[str, Any], what: str, one: dict[str, Any] | None, cores: int
) -> list[str] | None:
    runs = s[what]
    if not runs:
        return None
    wall, n = median(r["wall_s"] for r in runs), s["hosts"]
    node_cpu = median(r["node_cpu_s"] for r in runs)
    cpu, rss = median(r["cpu_s"] for r in runs), median(r["peak_rss_mb"] for r in runs)
    keys = ("wall_s", "cpu_s", "peak_rss_mb")
    base = [median(r[k] for r in one[what]) for k in keys] if one else None
    marginal = "—"
    if base and n > 1 and cpu is not None and rss is not None and None not in base:
        extra_cpu, extra_mb = (cpu - base[1]) / (n - 1), (rss - base[2]) / (n - 1)  # type: ignore[operator]
        marginal = f"{extra_cpu:.3f}s / {1000 * extra_mb:.0f} KB"
    return [
        what,
        str(n),
        fmt(wall),
        ratio(wall, base[0] if base else None),
        str(all(r["ok"] for r in runs)),
        fmt(cpu),
        fmt(rss, " MB", 0),
        marginal,
        fmt(node_cpu, "s", 1),
        _floor(cpu, node_cpu, wall, cores),
    ]


def _floor(
    operator_cpu: float | None, node_cpu: float | None, wall: float | None, cores: int
) -> str:
    """The wall time the CPU alone needs when the operator and every node share the bench's
    cores: no run can be faster. T(N) near it means the rig, not the operator, sets T(N)."""
    if operator_cpu is None or node_cpu is None or wall is None:
        return "—"
    floor = (operator_cpu + node_cpu) / cores
    return f"{floor:.1f}s ({wall / floor:.1f}x)" if floor else "—"


def _fleet(samples: list[dict[str, Any]], cores: int) -> str:
    rows = []
    for what in ("deploy", "status"):
        one = next((s for s in samples if s["hosts"] == 1 and s[what]), None)
        rows += [r for s in samples if (r := _fleet_row(s, what, one, cores))]
    headers = [
        "command",
        "hosts N",
        "T(N)",
        "T(N)/T(1)",
        "all ok",
        "operator CPU",
        "operator peak RSS",
        "operator per extra host: CPU / RSS",
        "node side CPU (same 2 cores)",
        "CPU floor: (operator + node CPU) / cores (T(N) vs it)",
    ]
    return table(headers, rows)


def _redeploy(samples: list[dict[str, Any]]) -> str:
    rows = [
        [
            s["kind"],
            fmt(s["wall_s"]),
            str(s["remote_ops"]),
            f"{s['bytes_uploaded']} B",
            f"{s['wire_to_node']} / {s['wire_from_node']} B",
            s["outcome"],
        ]
        for s in samples
    ]
    return table(
        [
            "round",
            "time",
            "remote commands",
            "file bytes uploaded",
            "wire to / from node",
            "result",
        ],
        rows,
    )


def _throughput(t: dict[str, Any]) -> str:
    if not t.get("ok"):
        return "did not run: " + str(t.get("stderr", ""))[:300]
    rows = [[k, f"{v:.1f} MB/s"] for k, v in t["mb_per_s_by_chunk"].items()]
    text = table(["chunk size", "throughput"], rows)
    if t.get("marginal_mb_per_s"):
        a, b = t["marginal_mb_per_s"]
        text += f"\n\nMarginal rate: {a:.1f} MB/s (2nd quarter), {b:.1f} MB/s (2nd half)."
    return text + f" Synthetic SGLang TP8 log of {t['log_mb']} MB, best of {t['best_of']}."


INTRO = """# firedup bench report

Written by `.venv/bin/python -m bench` (docs/benchmarks.md). Every tool talks to the same
private sshd on 127.0.0.1 and the same simulated node (`sim/`): real processes, ports, files
and SSH, no GPU. The machine is shared and small (see the load average): absolute numbers
are this machine's; ratios between tools measured in the same run are the point.
"""

SECTIONS = {
    "latency": """## Detection latency

From the wall-clock moment the simulator records the event (`FIREDUP_SIM_EVENTS`: "ready" at
the fired-up line, "crashed" when the launcher tears its tree down) to the moment the tool
reports it. Case *ready*: tiny-llama, TP1, FIREDUP_SIM_SPEED=0.5 (ready ~3.5 s after launch).
Case *crash*: the same with FIREDUP_SIM_FAULT=oom_load (CUDA OOM while loading weights).
firedup: core API `wait_ready` over `SshNode`, tick 1 s (the CLI's default `--poll`), the
report is the moment `wait_ready` returns or raises. The story's loop: bench/loops/story_loop.sh
(ssh + grep for the ready line or error words, then sleep), its phase spread evenly over one
interval across runs. Ansible: `ansible.builtin.wait_for` with `search_regex` on the run's log
(bench/ansible/wait.yml), started before the launch and timed from the moment its module runs
on the node; the report is its `ok:` line. A negative latency means the tool saw the failure
in the log before the launcher finished killing its tree. Node CPU: everything under our sshd
from the launch to the report, as a share of one core.""",
    "steady": """## Node CPU during a long quiet wait

A hung launch (FIREDUP_SIM_FAULT=nccl_hang: silent after `Init torch distributed begin.`), so
each tool polls an unchanging node for the whole window; this is what most of a 30-minute
load costs. Measured with a quiet login shell (the bench's sshd sets HOME to an empty home) and,
for comparison, with this machine's root `~/.bashrc` (it runs `pyenv init`), which Debian's
bash reads for every command sshd runs.""",
    "biglog": """## Bytes over the wire with a large log

The host's `python` is bench/nodeside/noisy-python: it writes tens of MB of `NCCL INFO` lines
into the run's log (the server's own stdout, so lines interleave instead of overwriting) and
execs the real python; the engine reaches ready ~7 s later (FIREDUP_SIM_SPEED=0.25). Each tool
connects through a loopback TCP relay that counts the bytes of the SSH connection (encryption,
framing and window updates included), from the launch to the report. "payload to firedup" is
what its Node calls returned (streamed log plus probe output). The loop and wait_for move
almost nothing over the wire; they pay on the node instead, re-reading the whole log at each
poll (node CPU column).""",
    "slowlink": "## Waits over slow links\n\n" + (slowlink.__doc__ or ""),
    "router": "## Behind a router: a restart of every worker\n\n" + (router.__doc__ or ""),
    "status": "## Watching: `fab status` over +50 ms, `fab top`'s node CPU\n\n"
    + (status.__doc__ or ""),
    "e2e": """## End-to-end deploy against an instantly-ready node, and SSH connections

tiny-llama at FIREDUP_SIM_SPEED=1000: all that is left is process start-up. Each deploy is the
same rendered launch script into a fresh run directory, timed from the command's start to its
exit (the server is stopped afterwards, untimed). The hand-written script is
bench/loops/deploy.sh (ssh upload, ssh start, ssh + grep + ss every second); the playbook is
bench/ansible/deploy.yml (file, copy, shell, wait_for log, wait_for port; Ansible's default
ControlPersist). SSH connections are counted at the sshd ("Accepted publickey" lines at
LogLevel VERBOSE) per deploy. "remote ops" are firedup's Node calls (run, put, stream).""",
    "fleet": "## Fleet scaling\n\n" + (fleet_doc or ""),
    "redeploy": """## Idempotent redeploy

What a deploy does before its launch when nothing changed: `sync_patches` with the Kimi-K2.5
EAGLE-3 patch already applied to the node's sglang copy, then `plan_deploy` (render and
`bash -n`), on a fresh connection through the counting relay. The first apply is shown for
scale. "file bytes uploaded" counts file contents put on the node; the wire columns include
the node-side helper script, which travels as an argument.""",
    "throughput": """## Log classifier throughput

bench/logscan_throughput.py (written with the classifier): a synthetic SGLang TP8 EAGLE-3 log
fed to `LogScanner` in chunks.""",
}


def render_markdown(results: dict[str, Any]) -> str:
    parts = [INTRO, "## Machine\n\n" + _machine(results["machine"])]
    renderers = {
        "latency": lambda r: _latency(r["latency"]["summary"]),
        "steady": lambda r: _steady(r["steady"]["samples"], r["steady"]["per_command"]),
        "biglog": lambda r: _biglog(r["biglog"]),
        "slowlink": lambda r: slowlink.render_slowlink(r["slowlink"]),
        "e2e": lambda r: _e2e(r["e2e"]),
        "fleet": lambda r: _fleet(r["fleet"], int(r["machine"]["cores"])),
        "redeploy": lambda r: _redeploy(r["redeploy"]),
        "throughput": lambda r: _throughput(r["throughput"]),
        "router": lambda r: router.render_router(r["router"]),
        "status": lambda r: status.render_status(r["status"]),
        "top": lambda r: "### `fab top`'s refresh\n\n" + status.render_top(r["top"]),
    }
    for name, render in renderers.items():
        if name in results:
            parts.append((SECTIONS.get(name, "") + "\n\n" + render(results)).strip())
    if results.get("notes"):
        parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in results["notes"]))
    return "\n\n".join(parts) + "\n"
