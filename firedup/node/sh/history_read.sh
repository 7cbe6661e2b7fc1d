# The last lines of a node's history.   usage: history_read.sh FILE LINES
# Nothing (and exit 0) when nothing was ever recorded; decided here, not by parsing tail's
# message, which the node's locale may translate. Like a log, it is read only when it is a
# regular file (a link to /dev/zero would be read forever) and for at most 10 s.
[ -e "$1" ] || exit 0
if [ ! -f "$1" ]; then
  printf '%s is not a regular file (%s): not read\n' "$1" "$(stat -L -c %F -- "$1")" >&2
  exit 3
fi
exec timeout -s KILL 10 tail -n "$2" -- "$1"
