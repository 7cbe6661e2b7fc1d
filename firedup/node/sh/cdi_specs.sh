# Print the node's CDI specs, each as PATH NUL TEXT NUL.   usage: cdi_specs.sh
# podman reads its CDI specs from these two directories; a file that cannot be read is left
# out (podman could not read it either). Each spec's text is cut at 1 MiB.
for dir in /etc/cdi /var/run/cdi; do
  for f in "$dir"/*.yaml "$dir"/*.yml "$dir"/*.json; do
    if [ ! -f "$f" ] || [ ! -r "$f" ]; then continue; fi
    printf '%s\0' "$f"
    head -c 1048576 -- "$f"
    printf '\0'
  done
done
exit 0
