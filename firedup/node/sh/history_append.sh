# Append one record to a node's history.   usage: history_append.sh WORKDIR LINE
# One write(2) with O_APPEND: concurrent appenders never interleave inside a line on a local
# filesystem (dd with iflag=fullblock gathers the whole line before its single write).
set -eu
umask 077
file="$1/history.jsonl"
mkdir -p -- "$1"
torn=no
# A torn last line (a crash mid-write, a full disk) must not swallow this record: new line first.
if [ -s "$file" ] && [ -n "$(tail -c 1 -- "$file")" ]; then
  torn=yes
fi
{
  [ "$torn" = no ] || printf '\n'
  printf '%s\n' "$2"
} | dd of="$file" oflag=append conv=notrunc iflag=fullblock bs=1M count=1 status=none
