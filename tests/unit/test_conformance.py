"""Firedup against the real releases (facts read off the wheels, committed; no download here).

The network-marked twin, tests/network/test_conformance_index.py, re-derives the facts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.engine import Engine
from firedup.errors import InventoryError, RenderError
from firedup.launch.render import render_launch
from firedup.preflight.flagcheck import judge, problems, script_flags
from firedup.releases import argscan
from firedup.releases.conformance import MATRIX, load, release, releases
from firedup.releases.table import disagreements, render, verdicts

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def test_every_supported_release_accepts_every_launch_firedup_renders_for_it() -> None:
    assert disagreements() == []
    for engine in ("sglang", "vllm"):
        assert all(v.supported for v in verdicts(engine)), engine


def test_the_matrix_spans_the_releases_the_issue_names() -> None:
    for engine, versions in MATRIX.items():
        assert set(releases(engine)) == set(versions), "conformance.json is behind MATRIX"
    assert len(releases("sglang")) >= 8 and len(releases("vllm")) >= 5
    assert releases("sglang")[0].startswith("0.4.") and releases("sglang")[-1] == "0.5.23"
    assert releases("vllm")[0] == "0.8.0" and releases("vllm")[-1] == "0.33.0"


def test_docs_engines_md_is_the_generated_table() -> None:
    assert DOCS.read_text() == render(load()), "run scripts/conformance.py (or regenerate docs)"


def _script(engine: str, version: str | None, extra: dict[str, object], host: str = "n0") -> str:
    hosts = {n: {"transport": "local", "workdir": "/w", "deployment": "d"} for n in ("n0", "n1")}
    inv = parse_inventory(
        {"hosts": hosts, "deployments": {"d": {"engine": engine, "model": "/m", **extra}}},
        Path("t.yaml"),
    )
    spec = inv.host(host)
    return render_launch(
        spec,
        inv.deployment_for(spec),
        run_id="R",
        rundir="/w/runs/R",
        placement=inv.placement(spec),
        engine_version=version,
    ).text


@pytest.mark.parametrize(
    ("version", "flag"),
    [
        ("0.5.9", "--cuda-graph-max-bs"),
        ("0.5.14", "--cuda-graph-max-bs-decode"),
        ("0.5.23", "--cuda-graph-max-bs-decode"),
    ],
)
def test_cuda_graph_max_bs_is_spelled_per_release(version: str, flag: str) -> None:
    flags = dict(script_flags(_script("sglang", version, {"cuda_graph_max_bs": 48})))
    assert flags[flag] == "48"
    assert set(flags) & {"--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"} == {flag}


def test_the_old_graph_flag_is_ambiguous_on_0_5_23_as_argparse_says() -> None:
    flags = {f: None for f in release("sglang", "0.5.23").flags}
    why = judge("--cuda-graph-max-bs", flags, Engine.SGLANG)
    assert why == (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    )
    assert (
        judge(
            "--cuda-graph-max-bs",
            {f: None for f in release("sglang", "0.5.9").flags},
            Engine.SGLANG,
        )
        is None
    )


def test_an_unknown_flag_names_the_closest_valid_one() -> None:
    flags = {f: None for f in release("sglang", "0.5.9").flags}
    assert judge("--mem-fraction-statik", flags, Engine.SGLANG) == (
        "unrecognized --mem-fraction-statik (closest: --mem-fraction-static)"
    )
    assert judge("--tp", flags, Engine.SGLANG) is None  # an unambiguous prefix


@pytest.mark.parametrize(
    ("version", "algorithm", "first"),
    [
        ("0.4.4", "EAGLE3", "0.4.5"),
        ("0.4.10.post2", "STANDALONE", "0.5.2"),
        ("0.5.2", "NGRAM", "0.5.3"),
    ],
)
def test_a_missing_sglang_algorithm_is_refused_naming_the_first_release(
    version: str, algorithm: str, first: str
) -> None:
    spec = {"algorithm": algorithm, "draft_model": "/d"}
    with pytest.raises(RenderError, match=f"first checked release with it is sglang {first}"):
        _script("sglang", version, {"speculative": spec})


@pytest.mark.parametrize(
    ("algorithm", "method"),
    [("EAGLE3", "eagle3"), ("NEXTN", "mtp"), ("STANDALONE", "draft_model"), ("NGRAM", "ngram")],
)
def test_vllm_methods_use_vllm_names(algorithm: str, method: str) -> None:
    spec = {"algorithm": algorithm, "draft_model": "/d"}
    text = _script("vllm", "0.33.0", {"speculative": spec})
    assert f'"method":"{method}"' in text
    assert method in (release("vllm", "0.33.0").speculative_methods or [])


def test_vllm_0_8_has_no_speculative_config_and_no_multinode() -> None:
    spec = {"algorithm": "EAGLE3", "draft_model": "/d"}
    with pytest.raises(
        RenderError, match=r"--speculative-config .* first checked release with it is vllm 0\.10\.2"
    ):
        _script("vllm", "0.8.0", {"speculative": spec})
    with pytest.raises(RenderError, match=r"first checked release with it is vllm 0\.12\.0"):
        _script("vllm", "0.11.0", {"nodes": ["n0", "n1"]})


def test_vllm_two_nodes_rank_one_is_headless_through_serve() -> None:
    rank0 = _script("vllm", "0.33.0", {"nodes": ["n0", "n1"]}, "n0")
    rank1 = _script("vllm", "0.33.0", {"nodes": ["n0", "n1"]}, "n1")
    for text in (rank0, rank1):
        assert "-m vllm.entrypoints.cli.main serve /m" in text
    assert "--headless" in rank1 and "--headless" not in rank0
    assert dict(script_flags(rank1))["--node-rank"] == "1"
    accepted = {f: None for f in release("vllm", "0.33.0").flags}
    assert problems(script_flags(rank1), accepted, Engine.VLLM) == []


def test_knobs_an_engine_ignores_are_refused_at_load() -> None:
    def load_one(engine: str, spec: dict[str, object]) -> None:
        parse_inventory(
            {
                "hosts": {"n": {"transport": "local", "deployment": "d"}},
                "deployments": {"d": {"engine": engine, "model": "/m", "speculative": spec}},
            },
            Path("t.yaml"),
        )

    with pytest.raises(InventoryError, match="vLLM has no such setting"):
        load_one("vllm", {"algorithm": "EAGLE3", "draft_model": "/d", "eagle_topk": 1})
    with pytest.raises(InventoryError, match="draft_tp: SGLang runs the draft"):
        load_one("sglang", {"algorithm": "EAGLE3", "draft_model": "/d", "draft_tp": 8})


def test_argscan_reads_add_argument_and_annotated_field_schemes() -> None:
    old = """
ALGOS = ["EAGLE", "EAGLE3"]
def add(parser):
    parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
    parser.add_argument("--speculative-algorithm", choices=ALGOS + ["NGRAM"])
    parser.add_argument("--x", choices=list(D.keys()))
"""
    new = """
class Exec_(msgspec.Struct):
    cuda_graph_max_bs_decode: A[Optional[int], "help"] = None
    mode: A[Optional[Literal["a", "b"]], Arg(help="h", aliases=["--md"])] = None
    hidden: A[int, Arg(no_cli=True)] = 1
    plain: int = 3
    flag: A[bool, Arg(action=argparse.BooleanOptionalAction)] = True
class FrontendArgs:
    api_key: str | None = None
Method = Literal["eagle", Other]
Other = Literal["mtp"]
"""
    flags = argscan.scan_flags([old, new])
    assert flags["--tp-size"] is None and "--tensor-parallel-size" in flags
    assert flags["--speculative-algorithm"] == ["EAGLE", "EAGLE3", "NGRAM"]
    assert flags["--x"] is None
    assert flags["--cuda-graph-max-bs-decode"] is None
    assert flags["--mode"] == ["a", "b"] and flags["--md"] == ["a", "b"]
    assert "--hidden" not in flags and "--plain" not in flags
    assert "--flag" in flags and "--no-flag" in flags
    assert "--api-key" in flags
    assert argscan.literal_alias([new], "Method") == ["eagle", "mtp"]


@pytest.mark.parametrize(
    "line",
    [
        "launch_server.py: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        "vllm serve: error: unrecognized arguments: --speculative-model /d",
        "sglang serve: error: argument --speculative-algorithm: invalid choice: 'DFLASH' "
        "(choose from 'EAGLE', 'EAGLE3')",
    ],
)
def test_argparse_refusals_are_bad_args(line: str) -> None:
    from firedup.logscan.model import Reason
    from firedup.logscan.signatures import HINTS, match_signature

    found = match_signature(line)
    assert found is not None and found.reason is Reason.BAD_ARGS and found.strong
    assert "fab preflight" in HINTS[Reason.BAD_ARGS]


def test_vllm_two_node_rank_one_script_matches_golden_and_passes_shellcheck(
    tmp_path: Path,
) -> None:
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "vllm-rank1.launch.sh"
    text = _script("vllm", "0.33.0", {"nodes": ["n0", "n1"], "tp": 16}, "n1")
    assert text == golden.read_text()
    script = tmp_path / "launch.sh"
    script.write_text(text)
    subprocess.run(["shellcheck", "-s", "bash", str(script)], check=True)


def test_the_engine_flags_check_fails_warns_and_passes() -> None:
    from firedup.preflight.facts import EngineArgs
    from firedup.preflight.flagcheck import check_flags
    from firedup.preflight.model import Outcome

    script = _script(
        "sglang", "0.5.9", {"cuda_graph_max_bs": 8, "args": {"mem-fraction-statik": 1}}
    )
    flags = {f: release("sglang", "0.5.9").choices(f) for f in release("sglang", "0.5.9").flags}
    args = EngineArgs(("srt/server_args.py",), flags, None)
    failed = check_flags(Engine.SGLANG, "0.5.9", script, None, args)
    assert failed.outcome is Outcome.FAIL
    assert "closest: --mem-fraction-static" in failed.detail
    assert "--cuda-graph-max-bs" not in failed.detail  # rendered the 0.5.9 way: accepted
    refused = check_flags(Engine.SGLANG, "0.4.4", None, "EAGLE3 ... first release 0.4.5", args)
    assert refused.outcome is Outcome.FAIL and "0.4.5" in refused.detail
    unread = check_flags(Engine.SGLANG, "0.5.9", script, None, EngineArgs((), {}, None, "boom"))
    assert unread.outcome is Outcome.WARN and "boom" in unread.detail
    clean = _script("sglang", "0.5.9", {"cuda_graph_max_bs": 8})
    assert check_flags(Engine.SGLANG, "0.5.9", clean, None, args).outcome is Outcome.PASS


def test_every_tracked_literal_is_one_firedup_reads_as_its_phase() -> None:
    """The literals looked up in the wheels are the ones logscan's markers depend on."""
    from firedup.logscan.rules import BAR_PHASES, MARKERS
    from firedup.logscan.signatures import match_signature
    from firedup.releases.conformance import LITERALS

    for lit in LITERALS:
        if lit.phase == "failure":
            assert match_signature(lit.needle) is not None, lit
            continue
        markers = [(m.needle, m.phase.value) for m in MARKERS]
        markers += [(label, phase.value) for label, phase in BAR_PHASES]
        assert any(n in lit.needle and p == lit.phase for n, p in markers), lit
