#!/usr/bin/env bash
# Prepare the embedded simulated node: its "installed" engines are a node-local copy of
# sim/python in .firedup-demo/site, so `fab sync-patches` edits that copy, never the checkout.
# --reset throws the copy (and the node's patch record and backups) away and starts afresh.
set -euo pipefail
cd "$(dirname "$0")/.."
node=.firedup-demo
if [ "${1:-}" = "--reset" ]; then
  rm -rf "$node/site" "$node/patches"
fi
if [ ! -d "$node/site" ]; then
  mkdir -p "$node"
  cp -r sim/python "$node/site.tmp"
  find "$node/site.tmp" -name __pycache__ -prune -exec rm -rf {} +
  mv "$node/site.tmp" "$node/site"
fi
