# End a firedup lock holder.   usage: lock_end.sh WORKDIR [PID]
# With PID (a normal release): end that holder. Without (force-unlock): end the holder named in
# lock.json, or, when there is no record (a full disk), the lock holder of this workdir that
# holds the flock (its /proc/PID/fdinfo/9 shows it). Only a live process whose argv carries
# `firedup-lock_hold WORKDIR` is ever signalled: a pid reused by anything else is left alone.
# Prints `state=` one of released (it was alive and is gone), gone (already dead: the lock had
# ended with its connection), foreign (the pid is not a lock holder of ours), none (no record
# and no holder), and `pid=`.
workdir=$1
lock="$workdir/.lock"
record="$workdir/lock.json"
recorded() { sed -n 's/^{"holder_pid": \([0-9]*\),.*/\1/p' "$record" 2> /dev/null; }
marked() {
  local args i
  mapfile -d '' args < "/proc/$1/cmdline" 2> /dev/null || return 1
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[i]}" = firedup-lock_hold ] && [ "${args[i + 1]}" = "$workdir" ] && return 0
  done
  return 1
}
unrecorded() {
  local dir p
  for dir in /proc/[0-9]*; do
    p=${dir#/proc/}
    marked "$p" && grep -q '^lock:' "$dir/fdinfo/9" 2> /dev/null && { printf '%s\n' "$p"; return; }
  done
}
pid=${2:-$(recorded)}
[ -n "$pid" ] || pid=$(unrecorded)
[ -n "$pid" ] || { printf 'state=none\n'; exit 0; }
printf 'pid=%s\n' "$pid"
# A zombie (dead, not yet reaped by its parent) holds no lock and has no cmdline.
alive() {
  local stat
  stat=$(cat "/proc/$pid/stat" 2> /dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}
ours() { marked "$pid"; }
state=gone
if alive; then
  ours || { printf 'state=foreign\n'; exit 0; }
  state=released
  kill -TERM "$pid" 2> /dev/null
  for _ in $(seq 30); do
    alive || break
    sleep 0.1
  done
  # A holder stuck in a write (its operator frozen, the channel full) ignores TERM until then.
  alive && kill -KILL "$pid" 2> /dev/null
fi
# A holder that died without its trap leaves its record: clear it, but only under the lock and
# only if it is still that holder's, so a new owner's record is never erased.
if [ -e "$lock" ]; then
  exec 8>> "$lock"
  if flock -w 2 8 && [ "$(recorded)" = "$pid" ]; then
    rm -f -- "$record"
  fi
  exec 8>&-
fi
printf 'state=%s\n' "$state"
