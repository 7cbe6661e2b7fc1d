# The first process of a firedup container (its pid 1).   usage: container_init.sh RUNDIR
# Waits until container_start.sh has recorded this process's pid on the node (the file `go`),
# so a launch that fails at once still has a pid that status and wait can read; then runs the
# rendered engine.sh with its output appended to the bind-mounted server.log. A pid 1 gets no
# default signal handling, so TERM (`podman stop`) is passed on to the engine, which is this
# shell's child in this shell's session: the session is the run's, as on a python node.
cd "$1" || exit 1
while [ ! -e go ]; do sleep 0.05; done
bash ./engine.sh >> server.log 2>&1 < /dev/null &
child=$!
trap 'kill -TERM "$child" 2> /dev/null' TERM INT
wait "$child"
rc=$?
while kill -0 "$child" 2> /dev/null; do
  wait "$child"
  rc=$?
done
exit "$rc"
