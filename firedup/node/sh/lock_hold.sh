# Hold a node's firedup lock for as long as the operator's channel lives.
# usage: lock_hold.sh WORKDIR OWNER_JSON BEAT_S
# Prints `locked pid=<pid>` then one byte per BEAT_S: when the operator goes away (channel
# closed, connection dropped, laptop crashed) the next byte fails with EPIPE and the lock ends
# with this process; no lease to expire, nothing left behind. When the lock is taken it prints
# `busy` and the current owner's record (base64) instead, and exits 0.
# /proc/<pid>/cmdline of this process holds `firedup-lock_hold`: unlock checks that marker
# before it kills anything.
set -u
workdir=$1
owner=$2
beat=$3
lock="$workdir/.lock"
record="$workdir/lock.json"
mkdir -p -- "$workdir" || exit 2
exec 9>> "$lock" || exit 2
flock -n -E 75 9
taken=$?
if [ "$taken" -ne 0 ] && [ "$taken" -ne 75 ]; then
  printf 'error=flock failed (exit %s); is util-linux installed?\n' "$taken"
  exit 3
fi
if [ "$taken" -eq 75 ]; then
  # The owner writes its record just after taking the lock: give it a moment to appear.
  for _ in $(seq 20); do
    pid=$(sed -n 's/^{"holder_pid": \([0-9]*\),.*/\1/p' "$record" 2> /dev/null)
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && break
    sleep 0.05
  done
  printf 'busy\n'
  printf 'record=%s\n' "$(base64 -w0 < "$record" 2>/dev/null)"
  exit 0
fi
sleeper=
# The record goes while the lock is still ours, so it can never erase the next owner's record.
release() {
  rm -f -- "$record"
  [ -n "$sleeper" ] && kill "$sleeper" 2> /dev/null
  exit 0
}
trap release TERM HUP INT
trap '' PIPE
if ! written=$( { printf '{"holder_pid": %d, "acquired_at": %s, "owner": %s}\n' "$$" \
  "$(date +%s.%N)" "$owner" > "$record.tmp.$$" && mv -f -- "$record.tmp.$$" "$record"; } 2>&1); then
  # Say why (a full disk, a read-only workdir) instead of vanishing without an answer.
  rm -f -- "$record.tmp.$$"
  printf 'error=cannot write %s: %s\n' "$record" "$(echo "$written" | tail -n 1)"
  exit 2
fi
printf 'locked pid=%s\n' "$$"
while printf '.' 2> /dev/null; do
  # In the background so a TERM is handled at once, not after the sleep; fd 9 stays with us.
  sleep "$beat" 9>&- &
  sleeper=$!
  wait "$sleeper"
done
release
