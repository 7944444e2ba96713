#!/usr/bin/env bash
# The Debian packages the stack and the tests run, installed when missing (make run and make test call
# this first, so both work on a fresh machine): `packages.sh run` for the stack, `packages.sh test` for
# the tests too. As root it installs them with apt-get; otherwise through sudo where there is one, or it
# names what is missing and stops.
set -euo pipefail
need=()
want() { # want <package> <command or path>...
  local pkg=$1; shift
  for c in "$@"; do
    if [[ $c == /* ]]; then compgen -G "$c" >/dev/null && continue; else command -v "$c" >/dev/null && continue; fi
    need+=("$pkg"); return
  done
}
want prometheus prometheus promtool
want openssl openssl
want curl curl
if [ "${1:-run}" = test ]; then
  want util-linux unshare setpriv
  want iproute2 ip
  want chromium chromium                                  # renders the Swagger UI in a test
  want postgresql '/usr/lib/postgresql/*/bin/postgres'    # the history's tests on PostgreSQL
fi
[ ${#need[@]} -eq 0 ] && exit 0
echo "packages.sh: installing ${need[*]}"
sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "packages.sh: ${need[*]} missing; install them (apt-get install ${need[*]}) or run as root" >&2; exit 1; }
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
