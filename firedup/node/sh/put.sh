# Write stdin to PATH atomically with MODE (octal), creating parents.   usage: put.sh PATH MODE
# The upload path for nodes whose login shell breaks SFTP by printing (see firedup/node/ssh.py).
set -euo pipefail
umask 077  # parents made here are 0700 (docs/security.md); mktemp makes the file 0600
dir=$(dirname -- "$1")
mkdir -p -- "$dir"
tmp=$(mktemp "$dir/.put.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
chmod "$2" "$tmp"  # before any byte: a 0600 secret is never readable by others
cat > "$tmp"
mv -f -- "$tmp" "$1"
