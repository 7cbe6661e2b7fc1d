# The last lines of a node's history.   usage: history_read.sh FILE LINES
# Nothing (and exit 0) when nothing was ever recorded; decided here, not by parsing tail's
# message, which the node's locale may translate.
[ -e "$1" ] || exit 0
tail -n "$2" -- "$1"
