#!/usr/bin/env bash
# Runs a command in a new network namespace that has only the loopback interface, so that nothing it
# starts can reach an address outside 127.0.0.0/8. Needs root (as in CI). Modules and binaries must be
# built before: the namespace has no route to any registry.
#   stack/netns.sh COMMAND [ARG...]
set -euo pipefail
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' netns "$@"
