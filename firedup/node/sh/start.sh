# Start a run's launch.sh detached; print its pid.   usage: start.sh WORKDIR RUN_ID
# setsid + nohup + all three streams redirected: the server gets its own session (sid == pgid ==
# pid) and survives the SSH session. Only the redirected command is backgrounded, so the channel
# closes at once. Neither setsid (not a group leader here) nor nohup forks, and launch.sh execs
# the engine, so $! is the server's pid.
set -euo pipefail
workdir=$1
run_id=$2
rundir="$workdir/runs/$run_id"
cd "$rundir"
setsid nohup bash ./launch.sh > server.log 2>&1 < /dev/null &
pid=$!
printf '%s\n' "$pid" > pid
ln -sfn "runs/$run_id" "$workdir/.current.tmp"
mv -Tf "$workdir/.current.tmp" "$workdir/current"
printf 'pid=%s\n' "$pid"
