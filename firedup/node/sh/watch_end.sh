# End a slot's watch before anything else changes the slot (stop, deploy, start).
# usage: watch_end.sh WORKDIR [WAIT_S]
# TERM, then wait: a watch in the middle of a restart finishes that start (so `current` names
# the run it started, for the caller to stop) and lets the node's lock go before it exits.
# After WAIT_S (default 30) its whole process group is KILLed (its lock holder with it).
# Only the process watch/identity names, with that start time, in its own session, carrying
# the `firedup-watch WORKDIR` marker, is ever signalled. Prints `state=` ended (it was running
# and is gone), none (no watch, or it had already exited) or stuck, and `pid=`.
workdir=$1
wait_s=${2:-30}
identity="$workdir/watch/identity"
read -r pid start _ < "$identity" 2> /dev/null || { printf 'state=none\n'; exit 0; }
printf 'pid=%s\n' "$pid"
ours() {
  local text args i
  { read -r text < "/proc/$pid/stat"; } 2> /dev/null || return 1
  read -r -a fields <<< "${text##*) }"
  [ "${fields[0]}" != Z ] && [ "${fields[19]}" = "$start" ] && [ "${fields[3]}" = "$pid" ] ||
    return 1
  mapfile -d '' args < "/proc/$pid/cmdline" 2> /dev/null || return 1
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[i]}" = firedup-watch ] && [ "${args[i + 1]}" = "$workdir" ] && return 0
  done
  return 1
}
if ! ours; then
  rm -f -- "$identity"
  printf 'state=none\n'
  exit 0
fi
kill -TERM "$pid" 2> /dev/null
deadline=$(($(date +%s) + wait_s))
while ours && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 0.1
done
if ours; then
  kill -KILL -- "-$pid" 2> /dev/null
  for _ in $(seq 50); do
    ours || break
    sleep 0.1
  done
fi
if ours; then
  printf 'state=stuck\n'
  exit 0
fi
rm -f -- "$identity"
printf 'state=ended\n'
