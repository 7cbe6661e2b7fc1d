"""`python -m vllm.entrypoints.launchers.api_server.entry`: vLLM's single-node API server from
0.29 on (0.33 `launchers/api_server/entry.py:229`); `vllm.entrypoints.openai.api_server` is a
shim over it that warns it "may be removed"."""

from __future__ import annotations

from vllm.entrypoints.openai.api_server import main

if __name__ == "__main__":
    main()
