"""Writes the tiny placeholder safetensors shards and index of each simulated model.

The simulator only counts shards (for the weight-load bar); each file is a valid, empty
safetensors file (8-byte header length + JSON header) so tools that peek at it do not choke.
Run: python3 sim/models/make_shards.py
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

SHARDS = {"kimi-k25": 64, "kimi-k25-eagle3": 1, "tiny-llama": 2}


def write_shard(path: Path) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def main() -> None:
    root = Path(__file__).parent
    for model, count in SHARDS.items():
        names = (
            ["model.safetensors"]
            if count == 1
            else [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]
        )
        for name in names:
            write_shard(root / model / name)
        if count > 1:
            weight_map = {f"model.layers.{i}.placeholder": n for i, n in enumerate(names)}
            index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
            (root / model / "model.safetensors.index.json").write_text(
                json.dumps(index, indent=2) + "\n"
            )


if __name__ == "__main__":
    main()
