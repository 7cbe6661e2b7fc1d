# Start a run's container; print its pid.   usage: container_start.sh WORKDIR RUN_ID
# launch.sh is the runtime's `run -d` (rendered); the container's init waits for `go`. The pid
# recorded is the container's first process as the node sees it (a session leader: runc gives
# the container its own session), so probe.sh's session and listener checks read it as they
# read a python run's. `current` names the run before anything starts, as in start.sh.
set -euo pipefail
workdir=$1
run_id=$2
rundir="$workdir/runs/$run_id"
umask 077
cd "$rundir"
mapfile -d '' -t cli < runtime.argv
name="firedup-$run_id"
pid=
trap '[ -n "$pid" ] || rm -f -- secrets.env' EXIT
: > server.log
ln -sfn "runs/$run_id" "$workdir/.current.tmp"
mv -Tf "$workdir/.current.tmp" "$workdir/current"
if ! bash ./launch.sh > container.id 2> start.err; then
  printf 'the container runtime refused to start run %s: %s\n' "$run_id" "$(tail -n 3 start.err)" >&2
  "${cli[@]}" rm -f "$name" > /dev/null 2>&1 || true
  exit 3
fi
pid=$("${cli[@]}" inspect --format '{{.State.Pid}}' "$name")
stat=$(cat "/proc/$pid/stat")
read -r -a fields <<< "${stat##*) }"
if ! { printf '%s\n' "$pid" > pid && printf '%s %s %s\n' "$pid" "${fields[19]}" "$pid" > identity; }
then
  "${cli[@]}" rm -f "$name" > /dev/null 2>&1 || true
  pid=
  printf 'cannot record the pid of run %s; the container was removed again\n' "$run_id" >&2
  exit 3
fi
: > go
printf 'pid=%s\n' "$pid"
printf 'container=%s\n' "$name"
# What runs, as the runtime names it (for the history): the image's id and, where the runtime
# keeps one, its repository digest. Either may be empty; neither fails the start.
image_id=$("${cli[@]}" inspect --format '{{.Image}}' "$name" 2> /dev/null || true)
printf 'image_id=%s\n' "$image_id"
digests=
[ -z "$image_id" ] || digests=$("${cli[@]}" image inspect \
  --format '{{range .RepoDigests}}{{.}} {{end}}' "$image_id" 2> /dev/null || true)
printf 'image_digest=%s\n' "${digests%% *}"
