"""Make the real-engine tier's tiny Llama on the spot: nothing is fetched from a model hub.

Run with the tier's venv python (scripts/real-engine-setup.sh prints it):

    python tests/realengine/make_model.py OUT_DIR [--head-dim 32]

A LlamaConfig (hidden 128, 2 layers, 4 heads, 2 KV heads, vocab 2000, 2048 positions) with
random float32 weights saved as safetensors, and a byte-level BPE tokenizer trained with the
`tokenizers` library on text written here, saved through PreTrainedTokenizerFast with a chat
template and a generation config (../shared/real-engine.md). `--head-dim 16` makes the model
that starts, passes /health and dies on its first request on the CPU backend.

The directory is written beside OUT_DIR and renamed into place, so a half-made model is never
mistaken for a whole one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

VOCAB = 2000
HIDDEN = 128
HEADS = 4
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]


def corpus() -> list[str]:
    """Plain text to train the tokenizer on: words enough to fill a 2000-token vocabulary."""
    words = [
        "the", "server", "model", "node", "deploy", "ready", "token", "cache", "engine",
        "request", "answer", "launch", "stop", "health", "metric", "weight", "layer", "head",
        "memory", "prompt", "stream", "batch", "python", "process", "worker", "signal",
    ]  # fmt: skip
    lines = []
    for i in range(4000):
        a, b, c = words[i % len(words)], words[(i * 7) % len(words)], words[(i * 13) % len(words)]
        lines.append(f"{a} {b} {c} {i} {a}{b} {c}-{i % 97} {b.upper()} {i * 31 % 1009}.")
    return lines


def make_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def make_weights(out: Path, head_dim: int) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    generation = GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=3, max_new_tokens=16)
    generation.save_pretrained(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--head-dim", type=int, default=32)
    args = parser.parse_args(argv)
    out: Path = args.out
    if (out / "config.json").is_file():
        return 0
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    make_tokenizer(tmp)
    make_weights(tmp, args.head_dim)
    for path in tmp.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; a node's other login users read it too
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
