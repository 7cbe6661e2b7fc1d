# Stop a run's container and remove it.   usage: container_stop.sh RUNDIR GRACE_S
# The runtime's stop sends TERM (the init passes it to the engine) and KILLs the container
# after GRACE_S; rm removes it, so nothing of the run is left but its directory and log. Prints
# the fields stop.sh prints (members, killed, left, state), read by the same parser.
rundir=$1
grace=$2
rm -f -- "$rundir/secrets.env"
run_id=$(basename -- "$rundir")
name="firedup-$run_id"
mapfile -d '' -t cli < "$rundir/runtime.argv" 2> /dev/null || cli=(podman)
pid=$(cat "$rundir/pid" 2> /dev/null || true)
# A pid the kernel gave to another process since (its start time is not the recorded one) is
# not the container's: its session is never reported as ours.
start=
read -r _ start _ < "$rundir/identity" 2> /dev/null || true
if [ -n "$pid" ] && { read -r stat < "/proc/$pid/stat"; } 2> /dev/null; then
  read -r -a fields <<< "${stat##*) }"
  [ "${fields[19]}" = "$start" ] || pid=
fi
members() { [ -n "$pid" ] && ps -s "$pid" -o pid= 2> /dev/null | awk '{print $1}' | paste -sd, -; }
state=$("${cli[@]}" inspect --format '{{.State.Status}}' "$name" 2> /dev/null || true)
if [ -z "$state" ]; then
  printf 'state=not-running\n'
  exit 0
fi
before=$(members)
[ -z "$before" ] || printf 'members=%s\n' "$before"
if [ "$state" = running ]; then
  start=$(date +%s)
  "${cli[@]}" stop -t "$grace" "$name" > /dev/null 2>&1 || true
  # The runtime KILLed what outlived the grace period: say so, as stop.sh does.
  if [ $(($(date +%s) - start)) -ge "$grace" ] && [ -n "$before" ]; then
    printf 'killed=%s\n' "$before"
  fi
fi
"${cli[@]}" rm -f "$name" > /dev/null 2>&1 || true
for _ in $(seq 50); do
  [ -z "$(members)" ] && break
  sleep 0.1
done
printf 'left=%s\n' "$(members)"
if [ "$state" = running ]; then printf 'state=stopped\n'; else printf 'state=not-running\n'; fi
