#!/usr/bin/env bash
# gomod.sh <module directory>...: downloads each module's dependencies, trying three times. A fresh
# machine downloads hundreds of modules; one dropped connection to the module proxy would otherwise fail
# the build that happened to ask for it, with a message that names a build, not the network.
set -euo pipefail
for dir in "$@"; do
  for try in 1 2 3; do
    if (cd "$dir" && go mod download); then break; fi
    [ "$try" = 3 ] && { echo "gomod.sh: downloading the modules of $dir failed three times" >&2; exit 1; }
    echo "gomod.sh: downloading the modules of $dir failed; again in $((try * 10)) s" >&2
    sleep $((try * 10))
  done
done
