# Stop a run: TERM its process group, KILL whatever of its session is left after the grace period.
# usage: stop.sh RUNDIR GRACE_S      Prints the pids still alive at each step (none means clean).
# Nothing is signalled that is not the run's own. start.sh recorded the server's identity (pid,
# start time, session) in `identity`: the leader must still have that start time, and every
# other member must be in the run's session and have started after the leader. A pid that the
# kernel handed to another process after a crash prints `reused=PID` and is never signalled.
# (A run from before `identity` existed is stopped by its session alone.) Writes nothing: a
# full disk never keeps a server from stopping; it removes a leftover secrets.env.
rundir=$1
grace=$2
rm -f -- "$rundir/secrets.env"
pid=$(cat "$rundir/pid" 2>/dev/null || true)
if [ -z "$pid" ]; then
  printf 'state=no-pid\n'
  exit 0
fi
start=
read -r _ start _ < "$rundir/identity" 2> /dev/null || true
# /proc/PID/stat after the command name: [0] state, [3] session, [19] start time (field 22).
stat_of() {
  local text
  { read -r text < "/proc/$1/stat"; } 2> /dev/null || return 1
  read -r -a fields <<< "${text##*) }"
  [ "${#fields[@]}" -ge 20 ]
}
reused() { [ -n "$start" ] && stat_of "$pid" && [ "${fields[19]}" != "$start" ]; }
ours() {
  stat_of "$1" && [ "${fields[0]}" != Z ] && [ "${fields[3]}" = "$pid" ] || return 1
  [ -z "$start" ] || [ "${fields[19]}" -ge "$start" ]
}
members() {
  local p
  for p in $(ps -s "$pid" -o pid= 2> /dev/null); do
    if ours "$p"; then printf '%s\n' "$p"; fi
  done
}
if reused; then
  printf 'reused=%s\n' "$pid"
  printf 'state=not-running\n'
  exit 0
fi
left=$(members)
if [ -z "$left" ]; then
  printf 'state=not-running\n'
  exit 0
fi
printf 'members=%s\n' "$(echo "$left" | paste -sd, -)"
reused || kill -TERM -- "-$pid" 2>/dev/null || true
# A suspended group (SIGSTOP, a Ctrl-Z, a debugger) acts on TERM only once it runs again: CONT
# after TERM, as systemd does, so it ends cleanly now instead of being KILLed after the grace.
reused || kill -CONT -- "-$pid" 2>/dev/null || true
deadline=$(($(date +%s) + grace))
while [ -n "$(members)" ] && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 0.1
done
left=$(members)
if [ -n "$left" ]; then
  printf 'killed=%s\n' "$(echo "$left" | paste -sd, -)"
  reused || kill -KILL -- "-$pid" 2>/dev/null || true
  # Members that left the group (but not the session) are still ours: end them by pid.
  for p in $left; do ours "$p" && kill -KILL "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    [ -z "$(members)" ] && break
    sleep 0.1
  done
fi
printf 'left=%s\n' "$(members | paste -sd, -)"
printf 'state=stopped\n'
