"""firedup: deploy LLM inference servers (SGLang, vLLM) to GPU nodes over SSH, and know when
they are truly ready."""

__version__ = "0.1.0"
