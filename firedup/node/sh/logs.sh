# The last lines of a run's log.   usage: logs.sh RUNDIR LINES
tail -n "$2" -- "$1/server.log"
