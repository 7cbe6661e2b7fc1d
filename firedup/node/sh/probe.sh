# One round trip of facts about a run.   usage: probe.sh RUNDIR PORT OFFSET MAXBYTES [HEALTH_URL]
# Prints key=value lines; values that may hold arbitrary bytes are base64. Parsed by
# firedup/node/probe.py (a pure parser, tested on recorded output).
# A non-login ssh session's PATH can lack the sbin directories where ss lives (RHEL).
PATH="$PATH:/usr/sbin:/sbin"
export LC_ALL=C
rundir=$1
port=$2
offset=$3
max=$4
health_url=${5:-}
pid=$(cat "$rundir/pid" 2>/dev/null || true)
# $EPOCHREALTIME (bash 5) saves a fork per look (C locale: a dot as radix); older bash: date.
printf 'now=%s\n' "${EPOCHREALTIME:-$(date +%s.%N)}"
printf 'pid=%s\n' "$pid"
# The leader's start time against the one start.sh recorded (`identity`): after a crash the pid
# may be another process's, whose session is not the run (stop.sh never signals it either).
recorded=
[ -z "$pid" ] || { read -r _ recorded _ < "$rundir/identity"; } 2> /dev/null
started=
if [ -n "$recorded" ] && { read -r stat < "/proc/$pid/stat"; } 2> /dev/null; then
  read -r -a fields <<< "${stat##*) }"
  started=${fields[19]}
fi
if [ -n "$started" ] && [ "$started" = "$recorded" ] && { read -r up _ < /proc/uptime; } 2> /dev/null
then
  # The leader's age on the node's own clock (ticks since boot, USER_HZ 100; /proc/uptime in
  # hundredths): an uptime that no clock of the operator's enters.
  printf 'leader_age_cs=%s\n' "$((10#${up/./} - started))"
fi
if [ -n "$started" ] && [ "$started" != "$recorded" ]; then
  printf 'procs=\n'
elif [ -n "$pid" ]; then
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
  # MAXBYTES 0: the wait reads the log on the node and needs none of it here.
  if [ "$max" -gt 0 ]; then
    printf 'log=%s\n' "$(tail -c +"$((offset + 1))" "$rundir/server.log" | head -c "$max" | base64 -w0)"
  fi
fi
if [ -n "$health_url" ]; then
  # Asked from the node itself: no dependence on the port being reachable from the operator.
  if command -v curl > /dev/null 2>&1; then
    # --noproxy: a node's http_proxy must not answer for the server on its own loopback.
    code=$(curl -s --noproxy '*' -o /dev/null -w '%{http_code}' --max-time 3 "$health_url" 2>/dev/null)
  else
    code=$(python3 -c 'import sys, urllib.request, urllib.error
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    print(opener.open(sys.argv[1], timeout=3).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")' "$health_url" 2>/dev/null)
  fi
  printf 'health=%s\n' "${code:-000}"
fi
