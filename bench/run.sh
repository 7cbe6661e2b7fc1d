#!/usr/bin/env bash
# The bench in one command: every measurement, several runs each, a report under
# bench/results/ (docs/benchmarks.md). Arguments go to `python -m bench` (--quick, --only ...).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || scripts/setup.sh
exec .venv/bin/python -m bench "$@"
