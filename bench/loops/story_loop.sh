#!/usr/bin/env bash
# The story's monitor: ssh to the node every INTERVAL seconds and grep the log for success or
# error words, until one shows up or TIMEOUT seconds pass. FIRST_DELAY sets the loop's phase
# (a loop started some time before the launch); the bench spreads it over one interval.
#   usage: story_loop.sh INTERVAL FIRST_DELAY TIMEOUT LOG SSH_ARGV...
# Prints READY, FAILED <word> or TIMEOUT as soon as it knows.
set -uo pipefail
interval=$1 first=$2 timeout=$3 log=$4
shift 4
remote="grep -aqF 'fired up and ready to roll' $(printf '%q' "$log") && echo READY \
|| grep -aoE -m1 'Traceback|Error|error|FAILED' $(printf '%q' "$log")"
sleep "$first"
end=$((SECONDS + timeout))
while [ "$SECONDS" -lt "$end" ]; do
  out=$("$@" "$remote" 2> /dev/null | head -n 1)
  case "$out" in
    READY) echo READY; exit 0 ;;
    ?*) echo "FAILED $out"; exit 1 ;;
  esac
  sleep "$interval"
done
echo TIMEOUT
exit 2
