# The run directories of a workdir and which one `current` names.   usage: history_runs.sh WORKDIR
# Prints `current=<run id>` (empty when none) and one `run=<name>` per directory under runs/.
workdir=$1
target=$(readlink -- "$workdir/current" 2> /dev/null || true)
printf 'current=%s\n' "${target#runs/}"
[ -d "$workdir/runs" ] || exit 0
for dir in "$workdir"/runs/*/; do
  [ -d "$dir" ] || continue
  dir=${dir%/}
  printf 'run=%s\n' "${dir##*/}"
done
