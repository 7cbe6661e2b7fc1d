#!/bin/sh
# sshd AuthorizedKeysCommand for the reliability suite: the link drops in the middle of
# public-key authentication (the per-connection sshd that asked is killed), as a flaky link
# or a restarting sshd does. It prints no key.
kill -KILL "$PPID"
