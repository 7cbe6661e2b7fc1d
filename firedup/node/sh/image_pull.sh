# Pull an image on the node, its progress as it comes.   usage: image_pull.sh RUNTIME_ARGV...
# The arguments are the runtime's `pull` argv (OciRuntime.pull_argv); its output (both streams)
# is passed through line by line and the last line says how it ended: `pull_exit=N`.
"$@" 2>&1
printf 'pull_exit=%s\n' "$?"
