"""unwrap.Unwrapper: lines a terminal hard-wrapped at a fixed width, joined before reading.

Pure: it takes clean segments and gives lines. It is not wired into the scanner on this
branch (scanner.py is another helper's this round): /work/notes/h23-robust2-unwrap.patch
wires it, and docs/log-analysis.md says what it gains.
"""

from __future__ import annotations

from firedup.logscan.unwrap import Unwrapper


def _learned() -> Unwrapper:
    """An unwrapper that has learned 80 columns from a wrapped log."""
    unwrap = Unwrapper()
    for piece in _wrapped(80, RECORDS * 2):
        unwrap.feed(piece)
    unwrap.finish()
    assert unwrap.width == 80
    return unwrap


def _lines(texts: list[str]) -> list[str]:
    unwrap = Unwrapper()
    out = [line for text in texts for line in unwrap.feed(text)]
    return out + unwrap.finish()


def _wrapped(width: int, lines: list[str], indent: str = "") -> list[str]:
    """Each line cut at `width` columns, its continuation indented inside them."""
    out = []
    for line in lines:
        out.append(line[:width])
        step = width - len(indent)
        out.extend(indent + line[at : at + step] for at in range(width, len(line), step))
    return out


RECORDS = [
    "INFO 05-01 10:00:00 [api_server.py:1043] vLLM API server version 0.8.5 with a long tail "
    "of arguments that runs past the terminal's edge",
    "INFO 05-01 10:00:09 [gpu_model_runner.py:1329] Starting to load model /models/qwen2.5-32b "
    "from the local cache directory",
    "ValueError: User-specified max_model_len (65536) is greater than the derived max_model_len "
    "(max_position_embeddings=32768 or model_max_length=None in model's config.json)",
]


def test_lines_cut_at_a_learned_width_are_joined_mid_word() -> None:
    lines = _lines(_wrapped(80, RECORDS * 2))
    assert lines[-2:] == RECORDS[1:]  # learned from the first ones, the last are whole


def test_an_indented_continuation_loses_its_indentation_except_under_a_frame() -> None:
    assert _lines(_wrapped(80, RECORDS * 2, indent="  "))[-1] == RECORDS[-1]
    frame = '  File "/opt/venv/lib/python3.10/site-packages/vllm/engine/llm.py", line 9, in x'
    assert len(frame) == 80
    unwrap = _learned()
    assert unwrap.feed(frame) == []
    assert unwrap.feed("  x") == [frame + "  x"]


def test_a_repeated_longest_line_teaches_no_width_and_the_last_line_stays() -> None:
    access = 'INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK  (request 0001)'
    texts = [access.replace("0001", f"{i:04d}") for i in range(50)] + ["Killed"]
    assert _lines(texts) == texts


def test_what_starts_a_line_of_its_own_is_never_a_continuation() -> None:
    long = "x" * 79 + "y"
    for rest in (
        "INFO 05-01 10:00:10 [core.py:1] next record",
        "Traceback (most recent call last):",
        "RuntimeError: CUDA error: out of memory",
        "Loading:  40%|####  | 4/10 [00:01<00:01]",
        "xxxxxxxx and so on",  # starts as the held line did: a flood
        "\tcode",
    ):
        unwrap = _learned()
        assert unwrap.feed(long) == [], rest
        assert unwrap.feed(rest) == [long, rest], rest
    unwrap = _learned()
    tagged = "0: " + "a" * 77
    assert unwrap.feed(tagged) == []
    assert unwrap.feed("1: Killed") == [tagged, "1: Killed"]  # both wear one tag


def test_a_longer_line_unlearns_the_width() -> None:
    unwrap = _learned()
    unwrap.feed("z" * 200)
    assert unwrap.width == 0
