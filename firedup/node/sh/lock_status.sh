# Who holds a node's firedup lock, without touching the lock.   usage: lock_status.sh WORKDIR
# Prints key=value lines: held (a flock on the lock file, from /proc/locks), record (lock.json,
# base64), holder (ours | gone | foreign | none: is the recorded holder pid a live firedup lock
# holder for this workdir) and now (the node's clock). Parsed by firedup/node/lock.py.
workdir=$1
lock="$workdir/.lock"
record="$workdir/lock.json"
printf 'now=%s\n' "$(date +%s.%N)"
held=no
if [ -e "$lock" ] && [ -r /proc/locks ]; then
  dev=$(stat -c %d -- "$lock")
  # glibc's major()/minor() of st_dev, printed the way /proc/locks prints them.
  major=$(((dev >> 8) & 0xfff | ((dev >> 32) & ~0xfff)))
  minor=$((dev & 0xff | ((dev >> 12) & ~0xff)))
  id=$(printf '%02x:%02x:%s' "$major" "$minor" "$(stat -c %i -- "$lock")")
  # Lines with `->` are waiters, not holders.
  if awk -v id="$id" '$2 == "FLOCK" && $6 == id { found = 1 } END { exit !found }' /proc/locks
  then
    held=yes
  fi
fi
printf 'held=%s\n' "$held"
[ -f "$record" ] || { printf 'holder=none\n'; exit 0; }
printf 'record=%s\n' "$(base64 -w0 < "$record")"
pid=$(sed -n 's/^{"holder_pid": \([0-9]*\),.*/\1/p' "$record")
stat=$(cat "/proc/$pid/stat" 2> /dev/null)
stat=${stat##*) }
# A zombie (dead, not yet reaped by its parent) holds no lock and has no cmdline.
if [ -z "$pid" ] || [ -z "$stat" ] || [ "${stat%% *}" = Z ]; then
  printf 'holder=gone\n'
  exit 0
fi
mapfile -d '' args < "/proc/$pid/cmdline" 2> /dev/null
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  if [ "${args[i]}" = firedup-lock_hold ] && [ "${args[i + 1]}" = "$workdir" ]; then
    printf 'holder=ours\n'
    exit 0
  fi
done
printf 'holder=foreign\n'
