"""The parser files are found by following the parser from the launch's entry module.

Each package below is cut down from a real release's layout (the files and calls that build
the API server's parser, kept as the release writes them): vLLM 0.26-0.28
(entrypoints/openai/cli_args.py), 0.29-0.32 (entrypoints/launchers/cli_args.py, the entry in
launchers/api_server/entry.py), 0.33 (entrypoints/common/cli_args.py), SGLang 0.5.22 (field
classes imported from srt/arg_groups/fields/), and the simulator's callback style.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from firedup.engine import Engine
from firedup.preflight.facts import _snippet
from firedup.preflight.flagcheck import problems
from firedup.releases import argreach

ARG_UTILS = """
from vllm.utils.argparse_utils import FlexibleArgumentParser
class EngineArgs:
    @staticmethod
    def add_cli_args(parser: FlexibleArgumentParser) -> FlexibleArgumentParser:
        group = parser.add_argument_group("Model")
        group.add_argument("--model", type=str)
        group.add_argument("--max-model-len", type=int)
        return parser
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser, async_args_only=False):
        parser = EngineArgs.add_cli_args(parser)
        return parser
"""
CLI_ARGS = """
from vllm.engine.arg_utils import AsyncEngineArgs
class BaseFrontendArgs:
    lora_modules: list | None = None
    @classmethod
    def add_cli_args(cls, parser):
        return parser
class FrontendArgs(BaseFrontendArgs):
    host: str | None = None
    port: int = 8000
def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
"""
# A file the server imports that adds flags to another program's parser: never read.
TENSORIZER = """
class TensorizerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--tensorizer-uri")
"""
LAYOUTS = {
    "vllm-0.28": {
        "engine/arg_utils.py": ARG_UTILS,
        "entrypoints/openai/cli_args.py": CLI_ARGS,
        "model_executor/tensorizer.py": TENSORIZER,
        "entrypoints/openai/api_server.py": (
            "from vllm.entrypoints.openai.cli_args import make_arg_parser\n"
            "from vllm.model_executor.tensorizer import TensorizerArgs\n"
            "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
            "if __name__ == '__main__':\n"
            "    cli_env_setup()\n"
            "    parser = FlexibleArgumentParser(description='vLLM')\n"
            "    parser = make_arg_parser(parser)\n"
            "    args = parser.parse_args()\n"
        ),
    },
    "vllm-0.32": {
        "engine/arg_utils.py": ARG_UTILS,
        "entrypoints/launchers/cli_args.py": CLI_ARGS,
        "entrypoints/launchers/api_server/__init__.py": "",
        "entrypoints/launchers/api_server/entry.py": (
            "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
            "def main():\n"
            "    from vllm.entrypoints.launchers.cli_args import make_arg_parser\n"
            "    parser = FlexibleArgumentParser(description='vLLM')\n"
            "    parser = make_arg_parser(parser)\n"
            "    run(parser.parse_args())\n"
        ),
        "entrypoints/openai/api_server.py": (
            "import warnings\n"
            "from vllm.entrypoints.launchers.api_server.entry import build_and_serve\n"
            "if __name__ == '__main__':\n"
            "    warnings.warn('deprecated', DeprecationWarning)\n"
            "    from vllm.entrypoints.launchers.api_server.entry import main\n"
            "    main()\n"
        ),
    },
    "vllm-0.33": {
        "engine/arg_utils.py": ARG_UTILS,
        "entrypoints/common/cli_args.py": CLI_ARGS,
        "entrypoints/cli/serve.py": (
            "from vllm.entrypoints.common.cli_args import make_arg_parser\n"
            "class ServeSubcommand:\n"
            "    def subparser_init(self, subparsers):\n"
            "        serve_parser = subparsers.add_parser('serve')\n"
            "        serve_parser = make_arg_parser(serve_parser)\n"
            "        return serve_parser\n"
        ),
        "entrypoints/openai/api_server.py": (
            "from ..common import cli_args\n"
            "def main():\n"
            "    parser = cli_args.make_arg_parser(FlexibleArgumentParser())\n"
            "if __name__ == '__main__':\n"
            "    main()\n"
        ),
    },
}
SGLANG = {
    "launch_server.py": (
        "import sys\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        "if __name__ == '__main__':\n"
        "    server_args = prepare_server_args(sys.argv[1:])\n"
    ),
    "srt/server_args.py": (
        "import argparse\n"
        "from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass\n"
        "from sglang.srt.arg_groups.fields.model import ModelArgs\n"
        "from sglang.srt.arg_groups.fields import SOURCES\n"
        "from sglang.srt.arg_groups.choices import LOAD_FORMATS\n"
        "class ServerArgs:\n"
        "    @staticmethod\n"
        "    def add_cli_args(parser: argparse.ArgumentParser):\n"
        "        add_cli_args_from_dataclass(parser, ServerArgs)\n"
        "        parser.add_argument('--load-format', choices=LOAD_FORMATS)\n"
        "def prepare_server_args(argv):\n"
        "    parser = argparse.ArgumentParser(prog='sglang serve')\n"
        "    ServerArgs.add_cli_args(parser)\n"
        "    return parser.parse_args(argv)\n"
    ),
    "srt/arg_groups/arg_utils.py": "def add_cli_args_from_dataclass(parser, cls):\n    pass\n",
    "srt/arg_groups/choices.py": "LOAD_FORMATS = ['auto', 'pt']\n",
    "srt/arg_groups/fields/__init__.py": (
        "from sglang.srt.arg_groups.fields.spec import SpecArgs\nSOURCES = [SpecArgs]\n"
    ),
    "srt/arg_groups/fields/model.py": "class ModelArgs:\n    model_path: A[str, 'The model.']\n",
    "srt/arg_groups/fields/spec.py": (
        "class SpecArgs:\n"
        "    speculative_algorithm: A[Optional[str], Arg(choices=['EAGLE'])] = None\n"
    ),
}


def _package(root: Path, name: str, files: dict[str, str]) -> Path:
    pkg = root / name
    for rel, text in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(pkg).parents:
            (pkg / parent / "__init__.py").touch()
        path.write_text(text)
    return pkg


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_api_servers_own_flags_are_read_on_every_vllm_layout(
    layout: str, tmp_path: Path
) -> None:
    pkg = _package(tmp_path, "vllm", LAYOUTS[layout])
    got = argreach.node_flags([str(pkg)], "vllm")
    assert {"--host", "--port", "--lora-modules", "--headless", "--max-model-len"} <= set(
        got["flags"]  # type: ignore[arg-type]
    )
    cli_args = next(rel for rel in LAYOUTS[layout] if rel.endswith("cli_args.py"))
    assert got["files"] == [cli_args, "engine/arg_utils.py"]
    assert "--tensorizer-uri" not in got["flags"]  # type: ignore[operator]
    flags = [("--host", "0.0.0.0"), ("--port", "8000"), ("--model", "/m")]
    assert problems(flags, got["flags"], Engine.VLLM) == []  # type: ignore[arg-type]


def test_sglang_fields_and_choices_are_followed_through_imports(tmp_path: Path) -> None:
    pkg = _package(tmp_path, "sglang", SGLANG)
    got = argreach.node_flags([str(pkg)], "sglang")
    flags = got["flags"]
    assert flags == {  # type: ignore[comparison-overlap]
        "--load-format": ["auto", "pt"],
        "--model-path": None,
        "--speculative-algorithm": ["EAGLE"],
    }
    assert got["files"][:2] == ["srt/server_args.py", "srt/arg_groups/arg_utils.py"]  # type: ignore[index]


def test_a_parser_built_by_a_callback_is_followed(tmp_path: Path) -> None:
    files = {
        "launch_server.py": (
            "from sglang.srt.server_args import prepare_server_args\n"
            "if __name__ == '__main__':\n    prepare_server_args([])\n"
        ),
        "srt/server_args.py": (
            "import argparse\nfrom sglang.srt.build import build\n"
            "def add_cli_args(parser: argparse.ArgumentParser) -> None:\n"
            "    parser.add_argument('--port', type=int)\n"
            "def prepare_server_args(argv):\n    return build(add_cli_args, argv)\n"
        ),
        "srt/build.py": "def build(add, argv):\n    p = argparse.ArgumentParser()\n    add(p)\n",
    }
    got = argreach.node_flags([str(_package(tmp_path, "sglang", files))], "sglang")
    assert got["flags"] == {"--port": None}


def test_the_snippet_preflight_ships_reads_the_0_32_layout_on_the_nodes_python(
    tmp_path: Path,
) -> None:
    """Before: `vllm 0.32.0 would refuse the launch: unrecognized --host; unrecognized --port`."""
    _package(tmp_path, "vllm", {**LAYOUTS["vllm-0.32"], "version.py": ""})
    (tmp_path / "vllm" / "__init__.py").write_text("__version__ = '0.32.0'\n")
    args = json.dumps({"engine": "vllm", "models": [], "port": 1, "workdir": str(tmp_path)})
    out = subprocess.run(
        [sys.executable, "-c", _snippet(), args],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    facts = json.loads(out.splitlines()[-1])["engine"]["args"]
    assert facts["files"] == ["entrypoints/launchers/cli_args.py", "engine/arg_utils.py"]
    assert {"--host", "--port"} <= set(facts["flags"])


def test_the_shipped_snippet_parses_as_python_3_8() -> None:
    import ast

    ast.parse(_snippet(), feature_version=(3, 8))
