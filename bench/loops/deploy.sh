#!/usr/bin/env bash
# The same deploy as `fab deploy`, by hand: upload the rendered launch script, start it
# detached in its own session, then ssh every second until the log has the ready line and the
# port is in LISTEN (the story's two signals).
#   usage: deploy.sh LAUNCH_SCRIPT RUNDIR PORT TIMEOUT SSH_ARGV...
set -euo pipefail
script=$1 rundir=$2 port=$3 timeout=$4
shift 4
dir=$(printf '%q' "$rundir")
"$@" "mkdir -p $dir && cat > $dir/launch.sh && chmod 755 $dir/launch.sh" < "$script"
"$@" "cd $dir && { setsid nohup bash ./launch.sh > server.log 2>&1 < /dev/null & echo \$! > pid; }"
check="grep -aqF 'fired up and ready to roll' $dir/server.log && ss -Htln 'sport = :$port' | grep -q ."
end=$((SECONDS + timeout))
while [ "$SECONDS" -lt "$end" ]; do
  if "$@" "$check"; then
    echo READY
    exit 0
  fi
  sleep 1
done
echo TIMEOUT
exit 2
