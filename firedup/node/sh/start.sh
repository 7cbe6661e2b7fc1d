# Start a run's launch.sh detached; print its pid.   usage: start.sh WORKDIR RUN_ID
# setsid + nohup + all three streams redirected: the server gets its own session (sid == pgid ==
# pid) and survives the SSH session. Only the redirected command is backgrounded, so the channel
# closes at once. Neither setsid (not a group leader here) nor nohup forks, and launch.sh execs
# the engine, so $! is the server's pid.
# Atomic for the user: `current` names the new run *before* the server starts, so a `current`
# that cannot be switched (a directory in its place, no inodes left) starts nothing, and a pid
# that cannot be recorded stops the server again: no server runs that status and stop do not
# know of. The server's identity (pid, start time: /proc/PID/stat field 22, session) goes to
# `identity`; stop.sh signals nothing that does not match it.
set -euo pipefail
workdir=$1
run_id=$2
rundir="$workdir/runs/$run_id"
engine_umask=$(umask)
umask 077
cd "$rundir"
pid=
# A run that never started never read its secrets: they do not stay on the node either.
trap '[ -n "$pid" ] || rm -f -- secrets.env' EXIT
: > server.log
ln -sfn "runs/$run_id" "$workdir/.current.tmp"
mv -Tf "$workdir/.current.tmp" "$workdir/current"
# The engine keeps the operator's umask for what it writes elsewhere (caches); its log is ours.
(umask "$engine_umask" && exec setsid nohup bash ./launch.sh > server.log 2>&1 < /dev/null) &
pid=$!
stat=$(cat "/proc/$pid/stat")
read -r -a fields <<< "${stat##*) }"
if ! { printf '%s\n' "$pid" > pid && printf '%s %s %s\n' "$pid" "${fields[19]}" "$pid" > identity; }
then
  # Unrecorded, it would be invisible to status and stop: end it now, by its group and pid.
  kill -KILL -- "-$pid" 2> /dev/null || true
  kill -KILL "$pid" 2> /dev/null || true
  pid=
  printf 'cannot record the pid of run %s; the server was stopped again\n' "$run_id" >&2
  exit 3
fi
printf 'pid=%s\n' "$pid"
