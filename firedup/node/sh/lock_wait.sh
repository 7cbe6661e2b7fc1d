# Mark the lock's holder as a deploy that only waits for its started server: `fab stop` may
# take the lock over from it (a wait changes nothing on the node; stopping must not need to
# wait for it).   usage: lock_wait.sh WORKDIR HOLDER_PID
# The holder removes the mark when it ends (lock_hold.sh's release); stop compares the pid.
umask 077
printf '%s\n' "$2" > "$1/lock.waiting"
