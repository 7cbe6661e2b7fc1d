"""How long the CLI takes to start, before it does anything on a node.

Measures, interleaved (so machine load hits every command alike), the wall time of:
- `firedup --version`;
- `firedup --help status` and `fab --help status`: the whole namespace loaded, nothing run;
- the imports `fab status` makes (`import fabric.main, tasks` and building the namespace);
- the same imports in a baseline revision (default: the tree before issue 13, where `tasks`
  built its namespace and imported the whole core on import), extracted with `git archive`.
Prints the median and the minimum of each and the ratio the issue asks for: `firedup
--version` against the baseline's `fab status` imports (target: at most a third).

    .venv/bin/python bench/startup.py [--repeat 15] [--baseline 5a0c0f2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
# The commit before the layout moved and the CLI became lazy (issue 13).
BASELINE = "5a0c0f2"
# What `fab status` imports before it touches a node (the namespace is built then, too).
STATUS_IMPORTS = "import fabric.main, tasks; tasks.ns"


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _baseline_tree(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def commands(baseline: Path) -> dict[str, tuple[list[str], Path, dict[str, str]]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # PYTHONPATH is searched before the editable install's finder: the baseline's own code.
    old = {**env, "PYTHONPATH": str(baseline)}
    py = str(BIN / "python")
    return {
        "firedup --version": ([str(BIN / "firedup"), "--version"], REPO, env),
        "firedup --help status": ([str(BIN / "firedup"), "--help", "status"], REPO, env),
        "fab --help status": ([str(BIN / "fab"), "--help", "status"], REPO, env),
        "fab status imports": ([py, "-c", STATUS_IMPORTS], REPO, env),
        "baseline: fab --help status": ([str(BIN / "fab"), "--help", "status"], baseline, old),
        "baseline: fab status imports": ([py, "-c", STATUS_IMPORTS], baseline, old),
    }


def measure(repeat: int, rev: str) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="firedup-startup-") as tmp:
        cmds = commands(_baseline_tree(rev, Path(tmp)))
        check = [str(BIN / "python"), "-c", "import firedup; print(firedup.__file__)"]
        where = subprocess.run(check, cwd=tmp, env=cmds["baseline: fab status imports"][2],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert where.startswith(tmp), f"the baseline imported {where}"
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for argv, cwd, env in cmds.values():  # warm the page cache and .pyc files
            _timed(argv, cwd, env)
        for _ in range(repeat):
            for name, (argv, cwd, env) in cmds.items():
                times[name].append(_timed(argv, cwd, env))
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    times = measure(args.repeat, args.baseline)
    print(f"{'command':32} {'median s':>9} {'min s':>7}   ({args.repeat} runs each)")
    for name, values in times.items():
        print(f"{name:32} {statistics.median(values):9.3f} {min(values):7.3f}")
    ratio = statistics.median(times["firedup --version"]) / statistics.median(
        times["baseline: fab status imports"]
    )
    print(f"firedup --version / baseline fab status imports: {ratio:.2f} (target <= 0.33)")
    sys.exit(0 if ratio <= 1 / 3 else 1)


if __name__ == "__main__":
    main()
