"""Config fields of the `model` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A, Arg


class Model:
    _NS_PATH = "model"
    model_path: A[str | None, Arg(help="The path of the model weights.", aliases=["--model"])] = (
        None
    )
    load_format: A[str, "The format of the model weights to load."] = "auto"
    trust_remote_code: A[bool, "Whether to allow custom models from the Hub."] = False
    context_length: A[int | None, "The model's maximum context length."] = None
    revision: A[str | None, "The specific model version to use."] = None
    dtype: A[str, "Data type for model weights and activations."] = "auto"
    quantization: A[str | None, "The quantization method."] = None
    kv_cache_dtype: A[str, "Data type for kv cache storage."] = "auto"
    download_dir: A[str | None, "Model download directory for huggingface."] = None
