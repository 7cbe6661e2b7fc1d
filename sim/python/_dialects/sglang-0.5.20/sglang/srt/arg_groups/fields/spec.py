"""Config fields of the `spec` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A, Arg


class Spec:
    _NS_PATH = "spec"
    speculative_algorithm: A[
        str | None,
        "Speculative algorithm. Builtins: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO.",
    ] = None
    speculative_draft_model_path: A[
        str | None,
        Arg(help="The path of the draft model weights.", aliases=["--speculative-draft-model"]),
    ] = None
    speculative_draft_model_revision: A[str | None, "The draft model version."] = None
    speculative_draft_load_format: A[str | None, "The format of the draft model weights."] = None
    speculative_num_steps: A[int | None, "The number of steps sampled from the draft model."] = None
    speculative_eagle_topk: A[int | None, "The number of tokens sampled per step."] = None
    speculative_num_draft_tokens: A[int | None, "The number of draft tokens."] = None
