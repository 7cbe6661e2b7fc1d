# Print the current run's meta.json, or nothing.   usage: current.sh WORKDIR
cat "$1/current/meta.json" 2>/dev/null || true
