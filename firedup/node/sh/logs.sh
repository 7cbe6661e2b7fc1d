# The last lines of a run's log, bounded.   usage: logs.sh RUNDIR LINES MAXBYTES [follow [PID]]
# The log is read only when it is a regular file: a link to /dev/zero would be read until the
# node runs out of memory, a FIFO would block forever (exit 3, the file's type on stderr).
# At most the last MAXBYTES, for at most 10 s (killed past that). `follow` (`fab logs
# --follow`): the tail, then what is appended, until PID exits; `-f` follows the file opened
# here, so a log replaced by a device later is never read.
log=$1/server.log
if [ ! -f "$log" ]; then
  if [ -e "$log" ]; then
    printf '%s is not a regular file (%s): not read\n' "$log" "$(stat -L -c %F -- "$log")" >&2
    exit 3
  fi
  printf '%s: no such file\n' "$log" >&2
  exit 1
fi
if [ "${4:-}" = follow ]; then
  until_pid=()
  [ -z "${5:-}" ] || until_pid=(--pid="$5")
  exec tail -n "$2" -f -s 0.5 "${until_pid[@]}" -- "$log"
fi
timeout -s KILL 10 tail -c "$3" -- "$log" | tail -n "$2"
status=("${PIPESTATUS[@]}")
case ${status[0]} in
  0 | 141) exit "${status[1]}" ;; # 141: the line count was reached before the bytes ended
  137) printf '%s: still reading after 10 s: stopped\n' "$log" >&2; exit 124 ;;
  *) exit "${status[0]}" ;;
esac
