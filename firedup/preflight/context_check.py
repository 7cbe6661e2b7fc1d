"""Preflight's context-length check, per engine (pure; engines.md §4).

SGLang derives the target's context by its own keys and refuses a longer `--context-length`
(or a target longer than the draft) unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1. vLLM
derives max_model_len from config.json and the tokenizer's model_max_length (context.py,
after vLLM 0.32) and refuses a longer `--max-model-len` with a pydantic ValidationError
unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; a shorter draft is vLLM's own business. The
deployment's one knob for "run the longer context anyway" is `long_context: allow`.
"""

from __future__ import annotations

from firedup.config.deployment import Deployment
from firedup.engine import Engine
from firedup.preflight.context import derived_context_length, vllm_context_length, vllm_refuses
from firedup.preflight.model import Check, failed, passed, warned
from firedup.preflight.situation import Situation

NAME = "context length"
OLD_SPELLING = "'draft_context: extend' is the old spelling: write 'long_context: allow'"


def _model(s: Situation, path: str | None):  # type: ignore[no-untyped-def]
    return s.facts.models.get(path or "")


def _problems_sglang(s: Situation) -> tuple[list[str], int, int | None] | None:
    d = s.deployment
    target = _model(s, d.model)
    if target is None or target.config is None:
        return None
    derived, source = derived_context_length(target.config)
    wanted = d.context_length or derived
    problems = []
    if d.context_length and d.context_length > derived:
        problems.append(f"context_length {d.context_length} > the target's {derived} ({source})")
    draft = _model(s, d.draft_model)
    draft_len = derived_context_length(draft.config)[0] if draft and draft.config else None
    if draft_len is not None and wanted > draft_len:
        problems.append(f"the target's context {wanted} > the draft's {draft_len}")
    return problems, derived, draft_len


def _problems_vllm(s: Situation) -> tuple[list[str], int, int | None] | None:
    d = s.deployment
    target = _model(s, d.model)
    if target is None or target.config is None:
        return None
    derived, source = vllm_context_length(target.config, target.tokenizer_max_length)
    problems = []
    if d.context_length and vllm_refuses(target.config, d.context_length, derived):
        problems.append(f"context_length {d.context_length} > the model's {derived} ({source})")
    return problems, derived, None


def _allowed(d: Deployment, what: str) -> Check:
    note = f"{what}: {d.long_context_env}=1 is exported"
    why = (
        "the engine runs past the model's (or the draft's) trained window; quality (and "
        "speculative acceptance) may drop there"
    )
    if d.draft_context == "extend" and d.long_context is None:
        return passed(NAME, note, f"{why}; {OLD_SPELLING}")
    return passed(NAME, note, why)


def _fine(s: Situation, derived: int, draft_len: int | None) -> str:
    d = s.deployment
    wanted = d.context_length or derived
    detail = f"{wanted}" + (f", draft {draft_len}" if draft_len else "")
    draft = _model(s, d.draft_model)
    if d.engine is Engine.VLLM and draft is not None and draft.config is not None:
        short = vllm_context_length(draft.config, draft.tokenizer_max_length)[0]
        if short < wanted:
            detail += f"; the draft's {short} is shorter: vLLM adjusts the draft itself"
    return detail


def check_context(s: Situation) -> Check:
    """Requested context vs the one the engine derives (and the draft's, on SGLang)."""
    d = s.deployment
    found = _problems_vllm(s) if d.engine is Engine.VLLM else _problems_sglang(s)
    if found is None:
        return warned(NAME, "target config.json not readable; not checked")
    problems, derived, draft_len = found
    if not problems:
        return passed(NAME, _fine(s, derived, draft_len))
    what = "; ".join(problems)
    if d.allows_long_context:
        return _allowed(d, what)
    lower = min(x for x in (derived, draft_len) if x)
    return failed(
        NAME,
        f"{what}: {d.engine.value} refuses this launch unless {d.long_context_env}=1",
        f"either set 'long_context: allow' in the deployment (exports {d.long_context_env}=1; "
        f"runs past the trained window), or lower 'context_length' to {lower}",
    )
