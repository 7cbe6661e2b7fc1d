#!/usr/bin/env bash
# The demo: deploy the stand-in SGLang server to the embedded simulated node (this machine, no
# GPU) and wait until it is truly ready; then show `fab status`. Stop it with
#   .venv/bin/fab stop --host demo
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/fab deploy --host demo --restart
.venv/bin/fab status --host demo
