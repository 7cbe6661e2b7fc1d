# Remove run directories.   usage: history_prune.sh WORKDIR RUN_ID...
# Checks again on the node, at the moment of removal, what the operator's plan assumed: never
# the run `current` names, never a run with a live process. Prints `removed=ID` or
# `kept=ID reason`.
workdir=$1
shift
current=$(readlink -- "$workdir/current" 2> /dev/null || true)
current=${current#runs/}
for id in "$@"; do
  dir="$workdir/runs/$id"
  case $id in
    '' | . | .. | */*) printf 'kept=%s not-a-run-id\n' "$id"; continue ;;
  esac
  if [ ! -d "$dir" ] || [ -L "$dir" ]; then
    printf 'kept=%s missing\n' "$id"
    continue
  fi
  if [ "$id" = "$current" ]; then
    printf 'kept=%s current\n' "$id"
    continue
  fi
  pid=$(cat "$dir/pid" 2> /dev/null || true)
  if [ -n "$pid" ] && ps -s "$pid" -o stat= 2> /dev/null | awk '$1 !~ /^Z/ { n++ } END { exit !n }'
  then
    printf 'kept=%s alive\n' "$id"
    continue
  fi
  rm -rf -- "$dir" && printf 'removed=%s\n' "$id"
done
