# One round trip of facts about a run.   usage: probe.sh RUNDIR PORT OFFSET MAXBYTES
# Prints key=value lines; values that may hold arbitrary bytes are base64. Parsed by
# firedup/probe.py (a pure parser, tested on recorded output).
rundir=$1
port=$2
offset=$3
max=$4
pid=$(cat "$rundir/pid" 2>/dev/null || true)
printf 'now=%s\n' "$(date +%s.%N)"
printf 'pid=%s\n' "$pid"
if [ -n "$pid" ]; then
  # Members of the run's session that are not zombies: the server and every child it made.
  printf 'procs=%s\n' "$(ps -s "$pid" -o pid=,stat= 2>/dev/null | awk '$2 !~ /^Z/ {print $1}' | paste -sd, -)"
fi
if command -v ss > /dev/null 2>&1; then
  printf 'ss=%s\n' "$(ss -Htlnp "sport = :$port" 2>/dev/null | base64 -w0)"
else
  printf 'ss=missing\n'
fi
if [ -f "$rundir/server.log" ]; then
  printf 'log_size=%s\n' "$(stat -c %s "$rundir/server.log")"
  printf 'log=%s\n' "$(tail -c +"$((offset + 1))" "$rundir/server.log" | head -c "$max" | base64 -w0)"
fi
