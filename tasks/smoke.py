"""`fab smoke`: one real request from the node to its server: latency and tokens per second."""

from __future__ import annotations

import json
import sys

from fabric import task
from invoke.context import Context

from firedup.errors import DeployError, NotReadyError
from firedup.launch.runs import current_run
from firedup.ops.smoke import DEFAULT_PROMPT, SmokeResult, smoke
from tasks.common import INVENTORY_HELP, connected, get_inventory, per_host, reporting, say


@task(
    name="smoke",
    help={
        "host": "host, group or comma list (default: every host)",
        "inventory": INVENTORY_HELP,
        "max_new_tokens": "tokens to generate (default 32)",
        "prompt": f"the prompt (default {DEFAULT_PROMPT!r})",
        "json": "print the results as a JSON array",
    },
)
def smoke_test(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    max_new_tokens: int = 32,
    prompt: str = DEFAULT_PROMPT,
    json_: bool = False,
) -> None:
    """Send one real request from the node to the server; report latency and tokens/s."""
    with reporting():
        inv = get_inventory(c, inventory)
        names = [spec.name for spec in inv.select(host)]

        def one(name: str) -> SmokeResult:
            spec = inv.host(name)
            with connected(c, inv, name) as node:
                run = current_run(node, spec)
                if run is None:
                    raise NotReadyError(f"{name}: nothing was started here", hint="`fab deploy` it")
                return smoke(
                    node, run, max_new_tokens=int(max_new_tokens), prompt=prompt, python=spec.python
                )

        results = per_host(names, one)
        if json_:
            say(json.dumps([_json(n, r) for n, r in results.items()], indent=2))
        else:
            for result in results.values():
                say(result.summary() if isinstance(result, SmokeResult) else str(result))
        codes = [_code(r) for r in results.values()]
        if any(codes):
            sys.exit(max(codes))


def _json(name: str, result: SmokeResult | DeployError) -> dict[str, object]:
    if isinstance(result, SmokeResult):
        return result.to_json()
    return {"host": name, "ok": False, "error": result.message}


def _code(result: SmokeResult | DeployError) -> int:
    if isinstance(result, DeployError):
        return result.exit_code
    return 0 if result.ok else NotReadyError.exit_code
