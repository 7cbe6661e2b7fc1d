#!/usr/bin/env bash
# The demo: deploy the story's final launch (SGLang 0.5.9, Kimi-K2.5 + EAGLE-3 on 8 GPUs, with
# the context-length override and the hooks patch) to the embedded simulated node (this
# machine, no GPU), wait until it is truly ready, then show `fab status`. Stop it with
#   .venv/bin/fab stop --host demo
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/demo-node.sh
.venv/bin/fab deploy --host demo --restart
.venv/bin/fab status --host demo
