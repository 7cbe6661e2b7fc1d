"""What to run: a deployment (engine, model, its serving knobs), validated once at load.

The knobs every deployment of the story needs are first-class keys (tp, context_length,
speculative, ...), so the templates can render them per engine and preflight can reason about
them; anything else passes through `args`, one quoted word per value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from firedup.config.container import RuntimeName
from firedup.config.keep import Notify, Restart, Watch
from firedup.config.router import RouterSpec
from firedup.config.slots import check_gpus_key
from firedup.engine import Engine
from firedup.logscan.model import Phase

Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
ArgValue = str | int | float | bool | list[str | int | float]

# The env var SGLang reads to accept a context length above the draft's (engines.md §4).
SGLANG_LONG_CONTEXT_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
VLLM_LONG_CONTEXT_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
# What each engine reads to run a context longer than the model's (or the draft's) derived one.
LONG_CONTEXT_ENV = {Engine.SGLANG: SGLANG_LONG_CONTEXT_ENV, Engine.VLLM: VLLM_LONG_CONTEXT_ENV}


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


def _env_name(key: object) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise ValueError(f"{key!r} is not a valid environment variable name")
    return key


def env_map(value: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, raw in value.items():
        key = _env_name(key)
        if isinstance(raw, bool):
            raise ValueError(f"{key}: write booleans as strings ('1', 'true'), got {raw!r}")
        if not isinstance(raw, str | int | float):
            raise ValueError(f"{key}: expected a string or number, got {type(raw).__name__}")
        out[_env_name(key)] = str(raw)
    return out


class Speculative(FrozenModel):
    """Speculative decoding (the story: EAGLE-3 with a separate draft model)."""

    algorithm: Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
    draft_model: str | None = None
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)
    draft_tp: int | None = Field(default=None, ge=1)  # vLLM draft_tensor_parallel_size

    @model_validator(mode="after")
    def _draft_for_eagle(self) -> Speculative:
        if self.algorithm in {"EAGLE", "EAGLE3", "STANDALONE"} and not self.draft_model:
            raise ValueError(f"algorithm {self.algorithm} needs 'draft_model'")
        return self


class SecretSource(FrozenModel):
    """Where the operator's machine holds a secret: an env var or a file (never the inventory)."""

    env: str | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretSource:
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of 'env' (a variable name) or 'file' (a path)")
        return self


# Flags the first-class keys render; the same flag in `args` would be said twice.
_RESERVED_ARGS: Mapping[Engine, Mapping[str, str]] = {
    Engine.SGLANG: {
        "model-path": "model",
        "model": "model",
        "port": "port",
        "host": "bind",
        "tp": "tp",
        "tp-size": "tp",
        "tensor-parallel-size": "tp",
        "context-length": "context_length",
        "mem-fraction-static": "mem_fraction",
        "cuda-graph-max-bs": "cuda_graph_max_bs",
        "cuda-graph-max-bs-decode": "cuda_graph_max_bs",
        "trust-remote-code": "trust_remote_code",
        "speculative-algorithm": "speculative",
        "speculative-draft-model-path": "speculative",
        "speculative-draft-model": "speculative",
        "speculative-num-steps": "speculative",
        "speculative-eagle-topk": "speculative",
        "speculative-num-draft-tokens": "speculative",
        "nnodes": "nodes",
        "node-rank": "nodes",
        "dist-init-addr": "nodes",
    },
    Engine.VLLM: {
        "model": "model",
        "port": "port",
        "host": "bind",
        "tp": "tp",
        "tensor-parallel-size": "tp",
        "max-model-len": "context_length",
        "gpu-memory-utilization": "mem_fraction",
        "trust-remote-code": "trust_remote_code",
        "speculative-config": "speculative",
        "nnodes": "nodes",
        "node-rank": "nodes",
        "master-addr": "nodes",
        "master-port": "nodes",
        "headless": "nodes",
    },
}


class Deployment(FrozenModel):
    """What to run: an engine, a model, its serving knobs and extra arguments."""

    name: str = ""
    engine: Engine
    model: str = Field(min_length=1)
    port: Port = 30000
    bind: str = "127.0.0.1"
    tp: int = Field(default=1, ge=1)
    gpus: list[Annotated[int, Field(ge=0)]] | Literal["auto"] | None = None  # docs/inventory.md
    context_length: int | None = Field(default=None, ge=1)
    mem_fraction: float | None = Field(default=None, gt=0, le=1)
    cuda_graph_max_bs: int | None = Field(default=None, ge=1)
    trust_remote_code: bool = False
    speculative: Speculative | None = None
    # Run a context longer than the engine derives (the model's or the draft's) anyway: the
    # launch gets the engine's env var (LONG_CONTEXT_ENV). `draft_context: extend` is the old,
    # SGLang-only spelling of the same knob (kept; preflight names the new one).
    long_context: Literal["allow"] | None = None
    draft_context: Literal["extend"] | None = None
    args: dict[str, ArgValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, SecretSource] = Field(default_factory=dict)
    ready_timeout_s: float = Field(default=1800.0, gt=0)
    # Ready means it can serve: one real generation before READY (firedup.ops.ready_request).
    ready_request: bool = False
    patches: list[str] = Field(default_factory=list)
    phase_budgets_s: dict[str, float] = Field(default_factory=dict)
    nodes: list[str] = Field(default_factory=list)  # multi-node: host names in rank order
    dist_init_port: Port = 5000  # rank 0's rendezvous port (--dist-init-addr)
    # The engine release to render for when no node is asked (`fab render`); a deploy renders
    # for the release preflight finds on the node. Unset: the newest release firedup checked.
    engine_version: str | None = Field(default=None, pattern=r"^\d+(\.\d+)*([a-z0-9.+-]*)$")
    runtime: RuntimeName | None = None  # overrides the host's (docs/containers.md)
    image: str | None = None
    router: RouterSpec | None = None  # docs/router.md
    # After ready (firedup.config.keep, docs/operations.md): any of them starts the watch.
    restart: Restart | None = None
    notify: Notify | None = None
    watch: Watch | None = None

    @field_validator("phase_budgets_s")
    @classmethod
    def _check_budgets(cls, value: dict[str, float]) -> dict[str, float]:
        phases = [p.value for p in Phase]
        for name, seconds in value.items():
            if name not in phases:
                raise ValueError(f"{name!r} is not a phase; phases: {', '.join(phases)}")
            if not math.isfinite(seconds) or seconds <= 0:
                raise ValueError(f"{name}: a budget must be positive seconds, got {seconds}")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _check_env(cls, value: Any) -> Any:
        return env_map(value) if isinstance(value, Mapping) else value

    @field_validator("secrets", mode="before")
    @classmethod
    def _secret_shorthand(cls, value: Any) -> Any:
        """`secrets: [HF_TOKEN]` means: from the operator's env var of the same name."""
        if isinstance(value, list):
            value = {name: {"env": name} for name in value if isinstance(name, str)}
        if isinstance(value, Mapping):
            for key in value:
                _env_name(key)
        return value

    @field_validator("args")
    @classmethod
    def _check_arg_names(cls, value: dict[str, ArgValue]) -> dict[str, ArgValue]:
        for key in value:
            if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", key):
                raise ValueError(f"{key!r}: write flags without dashes, lower-case, e.g. 'tp'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Deployment:
        reserved = _RESERVED_ARGS[self.engine]
        for key in self.args:
            if key in reserved:
                raise ValueError(
                    f"args.{key}: set it with the deployment key '{reserved[key]}' instead"
                )
        clash = set(self.env) & set(self.secrets)
        if clash:
            raise ValueError(f"{', '.join(sorted(clash))}: both in env and in secrets")
        if self.cuda_graph_max_bs is not None and self.engine is Engine.VLLM:
            raise ValueError("cuda_graph_max_bs is an SGLang knob; for vLLM pass it in args")
        self._check_ignored_knobs()
        if self.nodes and (self.restart or self.watch):
            raise ValueError("restart/watch: a multi-node deployment is not watched yet")
        check_gpus_key(self.gpus, -(-self.tp // self.nnodes), self.env)
        return self

    def _check_ignored_knobs(self) -> None:
        """A knob the engine would silently drop is refused: the user meant something."""
        spec = self.speculative
        if spec is None:
            return
        if self.engine is Engine.VLLM:
            ignored = [k for k in ("eagle_topk", "num_draft_tokens") if getattr(spec, k)]
            if ignored:
                raise ValueError(
                    f"speculative.{', '.join(ignored)}: vLLM has no such setting (its "
                    "--speculative-config takes num_speculative_tokens = num_steps); remove it"
                )
        elif spec.draft_tp is not None:
            raise ValueError(
                "speculative.draft_tp: SGLang runs the draft with the target's tp; remove it"
            )

    @property
    def watched(self) -> bool:
        """Whether a deploy leaves the node-side watch running next to the server."""
        return bool(self.restart or self.notify or self.watch) and not self.nodes

    @property
    def nnodes(self) -> int:
        return max(1, len(self.nodes))

    @property
    def gpu_set(self) -> tuple[int, ...] | str | None:
        """`gpus:` as a value: a tuple of indices, "auto", or None."""
        return tuple(self.gpus) if isinstance(self.gpus, list) else self.gpus

    @property
    def draft_model(self) -> str | None:
        return self.speculative.draft_model if self.speculative else None

    @property
    def long_context_env(self) -> str:
        return LONG_CONTEXT_ENV[self.engine]

    @property
    def allows_long_context(self) -> bool:
        """The launch lets the engine run a context longer than it derives (the knob, its
        old spelling, or the engine's env var written in `env:`)."""
        raw = self.env.get(self.long_context_env, "").lower()
        knob = self.long_context == "allow" or self.draft_context == "extend"
        return knob or raw in {"1", "true", "yes", "y"}
