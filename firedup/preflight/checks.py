"""The preflight checks: pure functions of the node's facts and the deployment.

Each predicts a launch failure that would otherwise cost a 30-minute wait (engines.md §3-§5,
§10.5) and says what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable

from firedup.patching import PatchStatus
from firedup.preflight.context import architectures
from firedup.preflight.context_check import check_context
from firedup.preflight.cpu import check_cpu_memory, is_cpu_node
from firedup.preflight.flagcheck import check_engine_flags
from firedup.preflight.gaps import GAPS
from firedup.preflight.gpuchecks import check_gpu_set, check_gpu_users, check_slots
from firedup.preflight.model import Check, failed, passed, warned
from firedup.preflight.situation import Situation

GIB = 1024**3
MIN_DISK_BYTES = 1 * GIB
WARN_DISK_BYTES = 5 * GIB
REQUIRED_TOOLS = ("setsid", "nohup", "tail", "ps")


def check_tools(s: Situation) -> Check:
    missing = [t for t in REQUIRED_TOOLS if not s.facts.tools.get(t)]
    if missing:
        return failed(
            "tools",
            f"missing on the node: {', '.join(missing)}",
            "install coreutils/util-linux/procps; firedup starts and follows with them",
        )
    if not s.facts.tools.get("ss"):
        return failed(
            "tools", "ss is missing: firedup cannot see who listens on the port", "install iproute2"
        )
    if not s.facts.tools.get("curl"):
        return warned("tools", "curl is missing; health checks will use python instead")
    return passed("tools", "ss, setsid, nohup, tail, ps, curl present")


def check_engine(s: Situation) -> Check:
    name = s.deployment.engine.value
    if not s.facts.engine_importable:
        return failed(
            "engine",
            f"{name} does not import: {s.facts.engine_error}",
            "check the host's 'python' and 'env' (PYTHONPATH) in the inventory",
        )
    return passed(
        "engine",
        f"{name} {s.facts.engine_version or '(version unknown)'} "
        f"at {s.facts.engine_path} (python {s.facts.python_version})",
    )


def check_models(s: Situation) -> Check:
    problems = []
    for model in s.facts.models.values():
        if not model.exists:
            problems.append(f"{model.path} does not exist")
        elif model.config is None:
            problems.append(model.error or f"{model.path}/config.json is missing")
    if problems:
        return failed(
            "model paths",
            "; ".join(problems),
            "fix 'model' / 'speculative.draft_model', or copy the weights to the node",
        )
    return passed("model paths", ", ".join(m.path for m in s.facts.models.values()))


def _config(s: Situation, path: str | None) -> dict[str, object] | None:
    model = s.facts.models.get(path or "")
    return model.config if model else None


def check_model_hooks(s: Situation) -> Check:
    d = s.deployment
    target = _config(s, d.model)
    version = s.facts.engine_version
    algorithm = d.speculative.algorithm if d.speculative else None
    if target is None or version is None:
        return warned("model hooks", "architecture or engine version unknown; not checked")
    archs = architectures(target)
    for gap in GAPS:
        if gap.engine is not d.engine or not gap.applies(archs, algorithm, version):
            continue
        where = f"{gap.architecture} + {gap.algorithm} on {d.engine.value} {version}"
        outcome = _patch_outcome(s, gap.patch)
        if outcome is PatchStatus.ALREADY_APPLIED:
            return passed("model hooks", f"{where}: patch {gap.patch} is applied")
        if outcome is PatchStatus.WOULD_APPLY:
            return passed("model hooks", f"{where}: patch {gap.patch} will be applied by deploy")
        if outcome is PatchStatus.CONFLICTS:
            return failed(
                "model hooks",
                f"{where}: patch {gap.patch} conflicts",
                f"`fab sync-patches --check` shows the hunk; upgrade to {gap.fixed_in}",
            )
        return failed(
            "model hooks",
            f"{where} lacks {gap.missing}: the launch would crash with an AttributeError",
            f"add 'patches: [{gap.patch}]' to the deployment, or upgrade "
            f"{d.engine.value} to {gap.fixed_in}",
        )
    return passed("model hooks", "no known gap for this model, algorithm and version")


def _patch_outcome(s: Situation, name: str) -> PatchStatus | None:
    if s.patches is None or name not in s.deployment.patches:
        return None
    return next((o.status for o in s.patches.outcomes if o.name == name), None)


def check_patches(s: Situation) -> Check:
    if s.patches is None or not s.patches.outcomes:
        return passed("patches", "none listed")
    conflicts = s.patches.conflicts
    if conflicts:
        return failed(
            "patches",
            "; ".join(o.line() for o in conflicts),
            "the installed files differ from what the patch expects",
        )
    return passed("patches", "; ".join(o.line() for o in s.patches.outcomes))


def check_port(s: Situation) -> Check:
    port = s.deployment.port
    if not s.facts.listeners:
        return passed("port", f"{port} is free")
    ours = [lst for lst in s.facts.listeners if s.our_sid is not None and _in_session(s, lst.pids)]
    others = [lst for lst in s.facts.listeners if lst not in ours]
    if others:
        holders = ", ".join(
            f"{lst.local} by {'/'.join(lst.names) or '?'} "
            f"pid {','.join(map(str, lst.pids)) or 'hidden'}"
            for lst in others
        )
        return failed(
            "port",
            f"{port} is held by another process: {holders}",
            "stop it, or give the deployment another port",
        )
    if s.restart:
        return passed("port", f"{port} is held by our run {s.our_run}; --restart stops it first")
    return failed(
        "port",
        f"{port} is held by our running server (run {s.our_run})",
        "use --restart to replace it, or `fab stop` it first",
    )


def _in_session(s: Situation, pids: tuple[int, ...]) -> bool:
    members = {p.pid for p in s.facts.processes if p.sid == s.our_sid}
    return bool(set(pids) & (members | {s.our_sid or -1}))


def check_leftovers(s: Situation) -> Check:
    slots = {o.pid for o in s.facts.share.slots if o.alive}  # our other live deployments
    foreign = [p for p in s.facts.processes if p.sid != s.our_sid and p.sid not in slots]
    if not foreign:
        return passed("leftovers", "no engine processes from earlier attempts")
    chosen = s.gpus_chosen  # only memory on the GPUs this launch uses is in its way
    gpu_mib = {
        a.pid: a.used_mib
        for a in s.facts.gpu_apps
        if chosen is None or s.facts.gpu_index(a.gpu_uuid) in chosen
    }
    holding = sum(gpu_mib.get(p.pid, 0.0) for p in foreign)
    listed = ", ".join(f"{p.pid} ({p.cmdline.split()[0]})" for p in foreign[:6])
    more = f" and {len(foreign) - 6} more" if len(foreign) > 6 else ""
    detail = f"engine processes not of our current run: {listed}{more}"
    hint = (
        "they may be an earlier attempt; stop them by pid (kill PID) once you know whose they are"
    )
    if holding > 0:
        return failed(
            "leftovers", f"{detail}, holding {holding / 1024:.1f} GiB of GPU memory", hint
        )
    return warned("leftovers", detail, hint)


def check_gpus(s: Situation) -> Check:
    if is_cpu_node(s):
        return check_cpu_memory(s)  # no GPUs to check: host memory against the KV cache
    d = s.deployment
    if not s.facts.gpus_available:
        return failed(
            "gpus",
            f"cannot query GPUs: {s.facts.gpu_error}",
            "is the NVIDIA driver installed and nvidia-smi on the host's PATH?",
        )
    gpus = s.gpus_after_restart()
    per_node = -(-d.tp // d.nnodes)  # tp spans all the nodes of a multi-node deployment
    if len(gpus) < per_node:
        return failed(
            "gpus",
            f"{len(gpus)} GPU(s) on the node, tp={d.tp} over {d.nnodes} node(s) needs {per_node}",
            "lower 'tp' or pick a bigger node",
        )
    used = sorted(s.used_gpus(per_node), key=lambda g: g.free_mib)
    if not used:
        return passed("gpus", f"{len(gpus)} x {gpus[0].name}; no usable set chosen (gpu set)")
    tightest = used[0]
    fraction = d.mem_fraction
    if fraction is not None and tightest.free_mib < fraction * tightest.total_mib:
        return failed(
            "gpus",
            f"GPU {tightest.index} has {tightest.free_mib / 1024:.1f} GiB free, "
            f"mem_fraction {fraction} needs {fraction * tightest.total_mib / 1024:.1f} GiB",
            "free the GPU (see leftovers) or lower 'mem_fraction'",
        )
    if tightest.used_mib > 0.1 * tightest.total_mib:
        return warned(
            "gpus",
            f"GPU {tightest.index} already has {tightest.used_mib / 1024:.1f} GiB in use",
            "another process holds memory; the engine may size its cache down",
        )
    return passed(
        "gpus",
        f"{len(gpus)} x {gpus[0].name}, {tightest.free_mib / 1024:.0f} GiB free "
        f"on the tightest of the {len(used)} used",
    )


def check_disk(s: Situation) -> Check:
    free = s.facts.disk_free_bytes
    detail = f"{free / GIB:.1f} GiB free at {s.facts.disk_path}"
    if not s.facts.disk_writable:
        who = s.facts.login_user or "the login user"
        return failed(
            "workdir",
            f"{who} cannot create or write the workdir: {s.facts.disk_path} is not writable "
            f"by {who} (Permission denied)",
            "set the host's 'workdir' to a directory the login user owns (e.g. under its "
            "home), or create it once as root and chown it to that user",
        )
    if free < MIN_DISK_BYTES:
        return failed("disk", detail, "logs and backups need room: free some space in the workdir")
    if free < WARN_DISK_BYTES:
        return warned("disk", detail, "a long run's log can grow to several GiB")
    return passed("disk", detail)


CHECKS: tuple[Callable[[Situation], Check], ...] = (
    check_tools,
    check_engine,
    check_engine_flags,
    check_models,
    check_context,
    check_model_hooks,
    check_patches,
    check_port,
    check_leftovers,
    check_gpus,
    check_gpu_set,
    check_gpu_users,
    check_slots,
    check_disk,
)


def run_checks(s: Situation) -> tuple[Check, ...]:
    return tuple(check(s) for check in CHECKS)
