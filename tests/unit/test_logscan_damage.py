"""How a line's text is recovered from what wraps and damages it (normalize.py, wrappers.py).

One test per rule of the metamorphic round two (docs/log-analysis.md, "Metamorphic check"):
each damage a paste shows (docker's json-file records, HTML entities, a JSON-dumped log,
journalctl's precise stamps, torchrun's unspaced tag, a stamp after the message, a bar's
label, a known wrapper inside a learned one) is undone by shape, never by what a log says.
The fixture pairs are in tests/fixtures/logs/field/ (named in each test).
"""

from __future__ import annotations

import json

from firedup.logscan import Verdict, explain
from firedup.logscan.model import Phase, Reason
from firedup.logscan.normalize import clean, engine_says, parse_line, split_records
from firedup.logscan.wrappers import Wrappers


def _read(lines: list[str]) -> list[str]:
    """The messages of `lines` read in order with one log's learned wrappers, the first read
    again once the next has taught them (as the scanner holds it)."""
    wrappers = Wrappers(plain=engine_says)
    messages = [parse_line(line, wrappers.peel, wrappers.saw).message for line in lines]
    return [parse_line(lines[0], wrappers.strip).message, *messages[1:]]


def test_a_docker_json_file_record_is_the_line_it_holds_behind_its_time() -> None:
    # fixture: docker_json_file_records_engine_oom
    record = {"log": '  File "/x/vllm/engine.py", line 3, in init\n', "stream": "stderr"}
    stamped = {**record, "time": "2025-05-01T10:00:02.123456789Z"}
    assert clean(json.dumps(record).encode()) == '  File "/x/vllm/engine.py", line 3, in init'
    line = parse_line(clean(json.dumps(stamped).encode()))
    assert line.message == '  File "/x/vllm/engine.py", line 3, in init'
    assert line.stamp == (2025, 5, 1, 10, 0, 2, 123456)
    bar = {"log": "Loading:  10%|#  | 1/10\rLoading:  20%|## | 2/10\r\n", "stream": "stderr"}
    assert clean(json.dumps(bar).encode()) == "Loading:  20%|## | 2/10"  # what a terminal shows
    assert clean(b'{"log": 3}') == '{"log": 3}'  # not docker's: left as it is
    assert clean(b'{"log":"unterminated') == '{"log":"unterminated'


def test_html_entities_of_a_scraped_page_are_read_as_their_characters() -> None:
    # fixture: html_entities_scraped_access_lines_mid_serving
    assert clean(b"&quot;POST /generate HTTP/1.1&quot; 200 &lt;ok&gt; it&#39;s") == (
        '"POST /generate HTTP/1.1" 200 <ok> it\'s'
    )
    assert clean(b"a=1&b=2 &copy") == "a=1&b=2 &copy"  # no entity, no change


def test_a_json_dumped_log_is_cut_at_its_literal_newlines_only_when_it_holds_lines() -> None:
    # fixture: json_dumped_log_literal_newlines_killed
    record = 'INFO 04-12 09:15:52 gpu_executor.py:94] "x"'
    dumped = json.dumps(f"{record}\n{record}\nKilled")[1:-1]
    assert split_records(dumped) == [record, record, "Killed"]
    traceback = json.dumps('Traceback (most recent call last):\n  File "a.py"\nKeyError: 1')
    assert split_records(traceback[1:-1] + " " * 200) == [
        "Traceback (most recent call last):",
        '  File "a.py"',
        "KeyError: 1" + " " * 200,
    ]
    message = "ValueError: chat_template='{% for m in messages %}\\n{{ m }}\\n{% endfor %}' " * 3
    assert split_records(message) == [message]  # a message's own \n: no line behind it
    prompt = (
        "INFO 04-12 09:16:01 logger.py:37] Received request cmpl-1: prompt: 'Fix this:\\n"
        'Traceback (most recent call last):\\n  File "a.py", line 1\\nKeyError: 1\' ' + "x" * 90
    )
    assert split_records(prompt) == [prompt]  # a record's own string: not a log


def test_journalctl_precise_stamps_are_its_prefix() -> None:
    # fixture: journalctl_precise_stamps_one_oom_line
    for prefix in (
        "Dec 01 10:00:31.104512 gpu-node python3[2211]: ",
        "2025-12-01T10:00:31.104512+0000 gpu-node python3[2211]: ",
        "déc. 01 10:00:31 gpu-node python3[2211]: ",
    ):
        line = parse_line(prefix + "Killed")
        assert line.message == "Killed", prefix
        if prefix.isascii():  # a locale's month name leaves the date to the engine's stamp
            assert line.stamp is not None and line.stamp[3:6] == (10, 0, 31)
    state = explain(b"Dec 01 10:00:31.104512 gpu-node python3[2211]: Killed\n")
    assert state.verdict is Verdict.FAILED and state.reason is Reason.KILLED


def test_torchrun_tees_unspaced_tag_is_learned() -> None:
    # fixture: torchrun_tee_unspaced_tag_killed
    messages = _read(
        ["[default0]:INFO 04-12 09:15:52 gpu_executor.py:94] # GPU blocks: 1", "[default0]:Killed"]
    )
    assert messages == ["# GPU blocks: 1", "Killed"]
    assert (
        _read(["[default0]:Traceback (most recent call last):", '[default0]:  File "a.py"'])[1]
        == '  File "a.py"'
    )


def test_a_stamp_after_the_message_is_the_lines_stamp_and_starts_no_record() -> None:
    # fixture: stamp_after_message_kv_connector_serving
    text = (
        "INFO LMCache: Stored/updated 1 chunks [2024-11-19 20:08:43,749] -- /opt/lmcache/x.py:311"
    )
    line = parse_line(text)
    assert (line.message, line.level) == ("LMCache: Stored/updated 1 chunks", "INFO")
    assert line.stamp == (2024, 11, 19, 20, 8, 43, 749000)
    assert _read(["srun: " + text, "srun: " + text.replace("1 chunks", "2 chunks")]) == [
        "LMCache: Stored/updated 1 chunks",
        "LMCache: Stored/updated 2 chunks",
    ]  # the tag outside is learned; the logger's name behind it is the engine's line
    assert parse_line("[2024-11-19 20:08:43] INFO text").message == "INFO text"  # leading: kept


def test_a_bars_label_is_never_a_wrapper() -> None:
    # fixtures: journal_capture_bar_label_is_not_a_wrapper, rank_tag_on_shard_bars_alone
    bars = [
        f"Capturing batches (bs={160 - 8 * i} avail_mem=20.1{i} GB):  {45 + 5 * i}%|####  | "
        f"{9 + i}/20 [00:05<00:06,  1.81it/s]"
        for i in range(3)
    ]
    assert _read(bars) == bars
    shards = [
        f"[rank0]: Loading safetensors checkpoint shards: {20 * i}% Completed | {i}/5"
        for i in (1, 2)
    ]
    assert _read(shards) == [shard.removeprefix("[rank0]: ") for shard in shards]
    state = explain(
        ("\n".join(f"Dec 01 10:02:1{i} h sglang[8]: {bar}" for i, bar in enumerate(bars))).encode()
    )
    assert state.phase is Phase.CUDA_GRAPH


def test_a_known_wrapper_inside_a_learned_one_is_peeled_and_traffic_finds_records() -> None:
    # fixtures: srun_label_around_tui_border_traceback,
    # srun_tag_around_ray_tagged_access_lines_mid_serving
    border = ["0: │ Traceback (most recent call last):   │", '0: │   File "a.py", line 1, in x   │']
    assert _read(border) == ["Traceback (most recent call last):", '  File "a.py", line 1, in x']
    access = (
        "(SGLangEngine pid=4, ip=10.0.0.1) [2025-06-01 10:00:01] INFO:     1.2.3.4:5 - "
        '"POST /v1/chat/completions HTTP/1.1" 200 OK'
    )
    line = parse_line("srun: " + access, Wrappers(plain=engine_says).peel)
    assert line.message.startswith("1.2.3.4:5") and line.ranks == "SGLangEngine"
    nccl = [
        "h-7:41:41 [0] NCCL INFO Bootstrap timings total 0.001",
        "h-7:41:42 [1] NCCL INFO RAS up 0",
    ]
    assert _read(nccl) == nccl  # NCCL's own prefix on its bulk teaches no wrapper


def test_a_hard_wrap_inside_the_engine_prefix_leaves_a_prefix_and_its_tail() -> None:
    # fixture: hard_wrap_cuts_inside_the_engine_prefix
    head = parse_line("(EngineCore pid=7) INFO 12-01 10:00:58 [kv")
    assert (head.message, head.level, head.ranks) == ("", "INFO", "EngineCore")
    for tail in ("_cache_utils.py:634] ", "kv_cache_utils.py:634] ", "8 [kv_cache_utils.py:634] "):
        assert parse_line(tail + "GPU KV cache size: 81,920 tokens").message == (
            "GPU KV cache size: 81,920 tokens"
        ), tail
    for kept in ("12 workers] started", "see utils.py line 3] x", "Killed"):
        assert parse_line(kept).message == kept


def test_a_traceback_glued_onto_one_line_is_cut_before_its_header_frames_and_exception() -> None:
    # fixture: traceback_glued_onto_one_line_cut
    glued = (
        "    return f(x) Traceback (most recent call last): "
        'File "/x/a.py", line 3, in <module> main() File "/x/b.py", line 9, in main '
        "raise ValueError(x) ValueError: Bfloat16 is only supported on GPUs"
    )
    assert split_records(glued) == [
        "    return f(x)",
        "Traceback (most recent call last):",
        'File "/x/a.py", line 3, in <module> main()',
        'File "/x/b.py", line 9, in main raise ValueError(x)',
        "ValueError: Bfloat16 is only supported on GPUs",
    ]
    message = "RuntimeError: engine died: ValueError: bad value " + "x" * 200
    assert split_records(message) == [message]  # no traceback in it: an exception's own chain


def test_a_quote_is_one_blank_and_the_indentation_behind_it_is_the_logs() -> None:
    # fixture: quoted_usage_dump_cut_both_ends
    usage = "                     [--max-model-len MAX_MODEL_LEN]"
    assert parse_line("> " + usage).message == usage
    assert parse_line(">\t \t2026-05-20 10:14:03\tKilled").message == "Killed"  # a viewer's tabs
