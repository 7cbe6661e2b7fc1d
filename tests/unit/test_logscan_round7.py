"""Round seven: the seventh blind part's misses (vendor backends and other releases), each
read by the structure the released code prints, never by the one line a log showed.

Each rule has a crafted fixture pair under tests/fixtures/logs (named per section); these
tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.logscan import Phase, Reason, Verdict, explain
from firedup.logscan.frames import is_traceback_header
from firedup.logscan.harmless import handler_log

_V0 = b"INFO 03-11 08:00:09 llm_engine.py:249] Initializing an LLM engine (v0.6.4) with config\n"


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


# -- the cache sized on any device (vllm/tpu_v0_tpu_blocks_sized_cut) -------------------------


@pytest.mark.parametrize("device", ["GPU", "cuda", "TPU", "HPU", "NEURON"])
def test_a_block_count_on_any_device_is_the_kv_cache(device: str) -> None:
    line = f"INFO 11-02 09:02:10 executor.py:87] # {device} blocks: 9260, # CPU blocks: 4096\n"
    assert _read(_V0 + line.encode())[1] is Phase.KV_CACHE


def test_blocks_named_mid_sentence_are_no_phase() -> None:
    line = b"INFO 11-02 09:02:10 config.py:87] Using 16 # of blocks: see docs\n"
    assert _read(_V0 + line)[1] is Phase.LAUNCHING


# -- compiled per shape where CUDA captures (vllm/tpu_v1_kv_cache_then_compiling_input_shapes_
# cut, vllm/gaudi_hpu_blocks_then_warmup_buckets_cut) ------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Compiling the model with different input shapes...",  # V0 tpu_model_runner
        "Compiling the model with different input shapes for prefill:",
        "Compiling the model with different input shapes.",  # V1
        "Compiling sample_from_logits with different input shapes.",
        "Precompile all the subgraphs with possible input shapes.",  # tpu-inference
        "[Warmup][Prompt][1/32] batch_size:8 seq_len:2048 free_mem:55.1 GiB",  # Gaudi
        "[Warmup][Decode][204/416] batch_size:64 num_blocks:512 free_mem:14.2 GiB",
        "[Warmup][Graph/Decode][3/40] batch_size:4 query_len:1 num_blocks:96 free_mem:9 GiB",
    ],
)
def test_a_backends_per_shape_compile_is_the_cuda_graph_phase(line: str) -> None:
    log = _V0 + f"INFO 11-02 09:05:10 model_runner.py:274] {line}\n".encode()
    assert _read(log) == (Verdict.STARTING, Phase.CUDA_GRAPH, None)


@pytest.mark.parametrize(
    "line",
    [
        "Input shapes will be padded to the nearest bucket",
        "[Warmup] skipped: VLLM_SKIP_WARMUP=true",
        "Compiling a regex for structured output",
    ],
)
def test_lines_that_only_name_shapes_or_warmup_are_no_graph_phase(line: str) -> None:
    log = _V0 + f"INFO 11-02 09:05:10 model_runner.py:274] {line}\n".encode()
    assert _read(log)[1] is not Phase.CUDA_GRAPH


# -- Gaudi's startup around its warm-up (vllm/gaudi_cache_sized_cut_before_warmup,
# vllm/gaudi_graph_capture_summary_cut) and llm-scaler's profiling report
# (vllm/llmscaler_memory_profiling_report_cut) -------------------------------------------------


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        (
            "Pre-loading model weights on hpu:0 took 16.4 GiB of device memory",
            Phase.LOADING_WEIGHTS,
        ),
        ("Model profiling run took 612 MiB of device memory (17 GiB/94 GiB used)", Phase.KV_CACHE),
        (
            "Free device memory: 77.6 GiB, 69.8 GiB usable, 62.8 GiB reserved for KV cache",
            Phase.KV_CACHE,
        ),
        ("Initializing cache engine took 62.7 GiB of device memory", Phase.KV_CACHE),
        ("init_cache_engine took 37.9 GiB of device memory (53 GiB/94 GiB used)", Phase.KV_CACHE),
        ("[Memory Profiling Analysis]", Phase.KV_CACHE),
        ("[VLLM_SKIP_PROFILE_RUN] Skipping profile_run, estimating peak", Phase.KV_CACHE),
        (
            "Using 6.9 GiB/14.8 GiB of free device memory for HPUGraphs, 2.1 GiB for prompt",
            Phase.CUDA_GRAPH,
        ),
        (
            "Graph/Decode captured:48 (100.0%) used_mem:161.9 MiB buckets:[(1, 128)]",
            Phase.CUDA_GRAPH,
        ),
        ("Warmup finished in 49 secs, allocated 14.19 GiB of device memory", Phase.CUDA_GRAPH),
        ("Starting sampler warmup...", Phase.CUDA_GRAPH),
        ("Sampler warmup completed successfully", Phase.CUDA_GRAPH),
    ],
)
def test_gaudis_and_llm_scalers_startup_lines_name_their_phase(line: str, phase: Phase) -> None:
    log = _V0 + f"INFO 07-14 10:06:58 hpu_worker.py:140] {line}\n".encode()
    assert _read(log) == (Verdict.STARTING, phase, None)


@pytest.mark.parametrize(
    "line",
    [
        "Warmup finished in 3.2s",  # another program's words: no Gaudi allocation after them
        "Graph capture summary: captured: 4",
        "Using HPUGraphs for decode",
    ],
)
def test_look_alikes_of_gaudis_lines_are_no_graph_phase(line: str) -> None:
    log = _V0 + f"INFO 07-14 10:06:58 x.py:1] {line}\n".encode()
    assert _read(log)[1] is not Phase.CUDA_GRAPH


# -- Neuron compiles while it loads (vllm/neuron_compiler_flags_while_loading_cut,
# vllm/neuron_nxdi_hlo_compile_cut) ------------------------------------------------------------


def test_neurons_compiler_flags_are_the_loading_weights_phase() -> None:
    log = _V0 + b"INFO:Neuron:Neuron compiler flags: --auto-cast=none -O1 --lnc=2\n"
    assert _read(log) == (Verdict.STARTING, Phase.LOADING_WEIGHTS, None)


@pytest.mark.parametrize(
    "line",
    [
        "INFO:Neuron:Generating HLOs for the following models: ['context_encoding_model']",
        "INFO:Neuron:Generated all HLOs in 41.2 seconds",
        "INFO:Neuron:Starting compilation for the priority HLO",
        "INFO:Neuron:Done compilation for the priority HLO in 106.3 seconds",
        "INFO:Neuron:Done optimizing weight layout for all HLOs in 26.2 seconds",
        "INFO:Neuron:Starting compilation for all HLOs",
        "INFO:Neuron:Finished Compilation for all HLOs in 49.7 seconds",
        "2026-01-15 11:02:10.000331:  88  [INFO]: Using a cached neff at /c/M_1/model.neff",
        "2026-01-15 11:02:10.000331:  88  [INFO]: Compilation Successfully Completed for "
        "model.MODULE_1+2.hlo_module.pb",
    ],
)
def test_neurons_model_builder_and_compiler_lines_are_the_loading_weights_phase(line: str) -> None:
    assert _read(_V0 + f"{line}\n".encode()) == (Verdict.STARTING, Phase.LOADING_WEIGHTS, None)


@pytest.mark.parametrize(
    "line", ["HLO dump written to /tmp/x", "INFO: compilation for all HLOs is disabled", "no neff"]
)
def test_words_about_hlos_or_neffs_alone_are_no_phase(line: str) -> None:
    assert _read(_V0 + f"{line}\n".encode())[1] is Phase.LAUNCHING


def test_neurons_flags_after_the_cache_do_not_drag_the_phase_back() -> None:
    cache = b"INFO 11-02 09:02:10 executor.py:87] # NEURON blocks: 64, # CPU blocks: 0\n"
    log = _V0 + cache + b"INFO:Neuron:Neuron compiler flags: --auto-cast=none -O1\n"
    assert _read(log)[1] is Phase.KV_CACHE


# -- a capture bar whose label carries readings (sglang/eagle3_capture_bar_with_readings_cut) -


@pytest.mark.parametrize(
    "bar",
    [
        "Capturing batches (bs=16 avail_mem=9.72 GB):   0%|",
        "Capturing batches (bs=1 avail_mem=70 GB):  50%|#####",
    ],
)
def test_a_capture_bar_cut_before_its_counts_is_the_cuda_graph_phase(bar: str) -> None:
    log = b"[2025-07-09 14:21:12] KV Cache is allocated. #tokens: 4012, K size: 2 GB\n"
    assert _read(log + bar.encode() + b"\n")[1] is Phase.CUDA_GRAPH


# -- requests served as other releases show them (sglang/v01_new_fill_batch_lines_mid_serving,
# vllm/omni_request_level_metrics_mid_serving) --------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "new fill batch. #seq: 4. #cached_token: 96. #new_token: 1530. #remaining_req: 12.",
        "new fill batch. #seq: 1. #new_token: 9. #remaining_req: 0. #running_req: 0. ",
        "GPU: 0 new fill batch. #seq: 2. #cached_token: 0. #new_token: 64.",
        "[gpu_id=0] Decode batch. #running-req: 3, #token: 700, token usage: 0.01",
        "{'type': 'request_level_metrics',",
    ],
)
def test_a_request_served_in_another_releases_words_is_a_ready_server_mid_serving(
    line: str,
) -> None:
    assert _read(f"{line}\n".encode()) == (Verdict.READY, Phase.READY, None)


@pytest.mark.parametrize("tag", ["[rank0]: ", "0: ", "srun: "])
def test_an_old_fill_batch_line_behind_a_tag_a_one_line_paste_kept_is_still_served(
    tag: str,
) -> None:
    line = f"{tag}new fill batch. #seq: 1. #cached_token: 30. #new_token: 217. #remaining_req: 5."
    assert _read(f"{line}\n".encode())[0] is Verdict.READY


def test_batch_lines_differing_only_in_number_widths_teach_no_wrapper() -> None:
    """Two batch lines whose numbers differ in width share no wrapper: they stay batch lines."""
    log = (
        b"new fill batch. #seq: 4. #cached_token: 96. #new_token: 1530. #remaining_req: 12.\n"
        b"new fill batch. #seq: 2. #cached_token: 410. #new_token: 37. #remaining_req: 10.\n"
    )
    assert _read(log)[0] is Verdict.READY


def test_sglangs_fill_batch_after_its_startup_began_is_not_its_ready_line() -> None:
    log = (
        b"[2024-05-01 10:00:00] server_args=ServerArgs(model_path='m', port=30000)\n"
        b"new fill batch. #seq: 1. #cached_token: 0. #new_token: 7. #remaining_req: 0.\n"
    )
    assert _read(log)[0] is Verdict.STARTING


def test_metrics_named_in_prose_prove_nothing() -> None:
    assert _read(b"INFO Enabling request_level_metrics output\n")[0] is Verdict.STARTING


# -- the engine reported dead to a request being served (vllm/api_server_engine_dead_while_
# serving_no_stop) ------------------------------------------------------------------------------

_READY = (
    b"(APIServer pid=1) INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.10.1\n"
    b"(APIServer pid=1) INFO:     Application startup complete.\n"
)
_DEAD = (
    b"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
    b"See stack trace (above) for the root cause.\n"
)


@pytest.mark.parametrize("where", ["serving_chat.py:1100", "serving.py:1386"])
def test_a_handlers_report_of_the_engines_death_after_ready_fails_the_run(where: str) -> None:
    line = f"(APIServer pid=1) ERROR 05-02 11:30:12 [{where}] ".encode() + _DEAD
    access = (
        b'(APIServer pid=1) INFO:     10.0.0.7:5100 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    assert _read(_READY + line + access) == (Verdict.FAILED, Phase.READY, Reason.CRASH)


def test_the_output_handlers_report_after_ready_stays_a_stops() -> None:
    line = b"(APIServer pid=1) ERROR 05-02 11:30:12 [async_llm.py:480] " + _DEAD
    assert _read(_READY + line + b"INFO:     Shutting down\n")[0] is Verdict.READY


def test_a_handlers_report_after_a_stop_is_the_stops() -> None:
    stop = (
        b"(APIServer pid=1) INFO 05-02 11:30:11 [launcher.py:99] "
        b"[shutdown] API server: shutdown triggered\n"
    )
    line = b"(APIServer pid=1) ERROR 05-02 11:30:12 [serving_chat.py:1100] " + _DEAD
    assert _read(_READY + stop + line)[0] is Verdict.READY


def test_handler_log_reads_the_logging_files_name() -> None:
    assert handler_log("ERROR 05-02 11:30:12 [serving_completion.py:390] x")
    assert not handler_log("ERROR 05-02 11:30:12 [serving_utils.py] x")  # no line number
    assert not handler_log("ERROR 05-02 11:30:12 [core.py:390] serving failed")


# -- a traceback header cut where the log ends (vllm/v0_traceback_header_cut_at_the_end) -----


@pytest.mark.parametrize(
    "line",
    [
        "Traceback (most recent call last):",
        "Traceback (most recent call las",
        "Traceback (m",
        "Traceback (",
    ],
)
def test_a_header_whole_or_cut_opens_a_traceback(line: str) -> None:
    assert is_traceback_header(line)
    assert is_traceback_header("[rank0]: " + line)


@pytest.mark.parametrize(
    "line",
    [
        "Traceback (see above)",
        "Traceback",
        "Traceback (most recent call first)",
        "no traceback here",
    ],
)
def test_other_words_after_traceback_open_none(line: str) -> None:
    assert not is_traceback_header(line)


def test_a_log_ending_in_a_cut_header_failed() -> None:
    log = _V0 + b"INFO 09-03 07:44:21 model_runner.py:732] Loading model weights took 14.3 GiB\n"
    assert _read(log + b"[rank0]: Traceback (most recent c\n") == (
        Verdict.FAILED,
        Phase.LOADING_WEIGHTS,
        Reason.CRASH,
    )
