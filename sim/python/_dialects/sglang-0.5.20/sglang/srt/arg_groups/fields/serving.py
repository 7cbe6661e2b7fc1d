"""Config fields of the `serving` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from typing import Literal

from sglang.srt.arg_groups.arg_utils import A


class Serving:
    _NS_PATH = "serving"
    tokenizer_path: A[str | None, "The path of the tokenizer."] = None
    tokenizer_mode: A[Literal["auto", "slow"], "Tokenizer mode."] = "auto"
    skip_tokenizer_init: A[bool, "Skip the tokenizer init."] = False
    host: A[str, "The host of the HTTP server."] = "127.0.0.1"
    port: A[int, "The port of the HTTP server."] = 30000
    skip_server_warmup: A[bool, "Skip warmup."] = False
    api_key: A[str | None, "Set API key of the server."] = None
    served_model_name: A[
        str | None, "Override the model name returned by the v1/models endpoint."
    ] = None
    chat_template: A[str | None, "The builtin chat template name or its path."] = None
