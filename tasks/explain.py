"""`fab explain-log`: offline diagnosis of a startup log file."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.errors import UsageError
from firedup.ops.explain import explain_file, parse_engine, to_json, to_text
from tasks.common import reporting, say


@task(
    positional=["path"],
    help={
        "path": "the server log to read (required)",
        "engine": "sglang or vllm (default: detected from the text)",
        "json": "print one JSON object instead of the human summary",
    },
)
def explain_log(
    c: Context, path: str | None = None, engine: str | None = None, json: bool = False
) -> None:
    """Explain a SGLang/vLLM startup log: verdict, phase, progress, failure reason and hint.

    Usage: fab explain-log PATH [--engine sglang|vllm] [--json]
    Exit status is 0 whatever the verdict (the verdict is the output); 2 for a bad argument
    or a path that cannot be read.
    """
    with reporting():
        if not path:
            raise UsageError("explain-log: PATH is required (fab explain-log PATH [--json])")
        if path.startswith("-"):  # invoke hands `fab explain-log --help` over as the path
            raise UsageError(
                f"explain-log: {path!r} is an option, not a log path; see `fab --help explain-log`"
            )
        explanation = explain_file(path, parse_engine(engine))
        say(to_json(explanation) if json else to_text(explanation))
