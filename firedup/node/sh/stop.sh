# Stop a run: TERM its process group, KILL whatever of its session is left after the grace period.
# usage: stop.sh RUNDIR GRACE_S      Prints the pids still alive at each step (none means clean).
rundir=$1
grace=$2
pid=$(cat "$rundir/pid" 2>/dev/null || true)
if [ -z "$pid" ]; then
  printf 'state=no-pid\n'
  exit 0
fi
members() { ps -s "$pid" -o pid=,stat= 2>/dev/null | awk '$2 !~ /^Z/ {print $1}'; }
left=$(members)
if [ -z "$left" ]; then
  printf 'state=not-running\n'
  exit 0
fi
printf 'members=%s\n' "$(echo "$left" | paste -sd, -)"
kill -TERM -- "-$pid" 2>/dev/null || true
deadline=$(($(date +%s) + grace))
while [ -n "$(members)" ] && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 0.1
done
left=$(members)
if [ -n "$left" ]; then
  printf 'killed=%s\n' "$(echo "$left" | paste -sd, -)"
  kill -KILL -- "-$pid" 2>/dev/null || true
  # Members that left the group (but not the session) are still ours: end them by pid.
  for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    [ -z "$(members)" ] && break
    sleep 0.1
  done
fi
printf 'left=%s\n' "$(members | paste -sd, -)"
printf 'state=stopped\n'
