# Start a slot's watch detached, next to its server; print its pid.
# usage: watch_start.sh WORKDIR PYTHON BOOT CODE_FILE
# Like start.sh: setsid + nohup + all three streams redirected, so the watch has its own
# session (sid == pgid == pid) and outlives the SSH session. The caller has put config.json
# (and secrets.env, 0600, which the watch reads once and removes) in WORKDIR/watch/ and the
# shipped code in CODE_FILE. Its identity (pid, start time, session) goes to watch/identity;
# watch_end.sh signals nothing that does not match it. The argv marker `firedup-watch WORKDIR`
# says what the process is to anyone reading ps. `-I`: the node's PYTHON* variables and user site
# cannot put anything in front of the stdlib the watch imports.
set -euo pipefail
workdir=$1
python=$2
boot=$3
code=$4
home="$workdir/watch"
umask 077
cd "$home"
(exec setsid nohup "$python" -I -c "$boot" "$code" firedup-watch "$workdir" >> watch.log 2>&1 < /dev/null) &
pid=$!
stat=$(cat "/proc/$pid/stat")
read -r -a fields <<< "${stat##*) }"
printf '%s %s %s\n' "$pid" "${fields[19]}" "$pid" > identity.tmp
mv -f identity.tmp identity
printf 'pid=%s\n' "$pid"
