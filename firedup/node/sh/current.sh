# The current run's meta.json and pid.   usage: current.sh WORKDIR
# Prints `meta=<one-line json>` and `pid=<pid>`; nothing when no run was ever started.
meta=$(cat "$1/current/meta.json" 2>/dev/null) || exit 0
printf 'meta=%s\n' "$meta"
printf 'pid=%s\n' "$(cat "$1/current/pid" 2>/dev/null)"
