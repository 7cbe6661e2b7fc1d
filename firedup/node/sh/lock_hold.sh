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
# Every operation that changes a node takes this lock first, so this is where the workdir is
# made and closed to other users (docs/security.md): files 0600, directories 0700, and the
# lock file unopenable by anyone else (flock works on a read-only descriptor too).
# Parents it has to make (a new /data) keep the account's umask: they are not ours to close.
# Say why the workdir cannot be used (mkdir's own words: Permission denied, read-only).
if ! made=$(mkdir -p -- "$(dirname -- "$workdir")" 2>&1 && umask 077 && mkdir -p -- "$workdir" 2>&1)
then
  printf 'error=cannot create the workdir %s as %s: %s\n' "$workdir" "$(id -un)" "$(echo "$made" | tail -n 1)"
  exit 2
fi
if [ ! -O "$workdir" ]; then
  printf 'error=%s belongs to %s, not to %s; refusing to use it\n' "$workdir" \
    "$(stat -c %U -- "$workdir")" "$(id -un)"
  exit 2
fi
was=$(stat -c %a -- "$workdir")
chmod 0700 -- "$workdir" || { printf 'error=cannot close %s to other users\n' "$workdir"; exit 2; }
# A workdir someone opened to a group (2775, a team's setup) is closed: say so, once.
[ $((8#$was & 8#077)) -eq 0 ] || printf 'closed=%s\n' "$was"
umask 077
if ! { exec 9>> "$lock"; } 2> /dev/null; then
  printf 'error=cannot write %s as %s: Permission denied\n' "$lock" "$(id -un)"
  exit 2
fi
chmod 0600 -- "$lock" 2> /dev/null  # a lock file made by an older firedup
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
  printf 'now=%s\n' "$(date +%s.%N)"  # the record's age is told on the node's clock
  printf 'record=%s\n' "$(base64 -w0 < "$record" 2>/dev/null)"
  exit 0
fi
sleeper=
# The record goes while the lock is still ours, so it can never erase the next owner's record.
release() {
  rm -f -- "$record" "$workdir/lock.waiting"
  [ -n "$sleeper" ] && kill "$sleeper" 2> /dev/null
  exit 0
}
trap release TERM HUP INT
trap '' PIPE
if ! written=$( { printf '{"holder_pid": %d, "acquired_at": %s, "owner": %s}\n' "$$" \
  "$(date +%s.%N)" "$owner" > "$record.tmp.$$" && mv -f -- "$record.tmp.$$" "$record"; } 2>&1); then
  # A full disk: hold the lock without a record (lock_end finds this holder by its marker)
  # and say so; stopping a server must never need free space.
  rm -f -- "$record.tmp.$$"
  printf 'warning=cannot write %s: %s\n' "$record" "$(echo "$written" | tail -n 1)"
fi
# A secrets.env that outlived its launch (one that never started, or a run from before the
# launch removed its own): none stays. A launch reads its own within a second of its start.
find "$workdir/runs" -mindepth 2 -maxdepth 2 -name secrets.env -type f -mmin +1 \
  -delete 2> /dev/null
printf 'locked pid=%s\n' "$$"
while printf '.' 2> /dev/null; do
  # In the background so a TERM is handled at once, not after the sleep; fd 9 stays with us.
  sleep "$beat" 9>&- &
  sleeper=$!
  wait "$sleeper"
done
release
