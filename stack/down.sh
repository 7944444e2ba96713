#!/usr/bin/env bash
# Stops what stack/up.sh started, by the PIDs it recorded. Never by process name. The apiserver's
# clients stop together, then the apiserver, then etcd: each takes about two seconds to stop
# gracefully, so in parallel the whole stack stops in about seven.
#   stack/down.sh [STATE_DIR]
STATE=${1:-${RAY_STACK_STATE:-.run/stack}}
[ -d "$STATE/pids" ] || exit 0
stop() { # name...: SIGTERM to each process group, then wait up to 5 s for all, then SIGKILL
  local name f pid pids=()
  for name in "$@"; do
    f=$STATE/pids/$name.pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
      pids+=("$pid")
    fi
  done
  gone 50 "${pids[@]}" && { for name in "$@"; do rm -f "$STATE/pids/$name.pid"; done; return; }
  for pid in "${pids[@]}"; do running "$pid" && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; }; done
  # Until the killed are gone: a process that still holds its port would keep the next stack's
  # component from listening on it.
  gone 50 "${pids[@]}"
  for name in "$@"; do rm -f "$STATE/pids/$name.pid"; done
}
# running PID: the process or any of its process group is still there and not a zombie (a killed
# process whose parent has not reaped it holds no port).
running() {
  local p
  for p in "$1" $(pgrep -g "$1" 2>/dev/null); do
    case $(ps -o stat= -p "$p" 2>/dev/null) in "" | Z*) ;; *) return 0 ;; esac
  done
  return 1
}
# gone TENTHS PID...: waits up to TENTHS tenths of a second until none of them is running.
gone() {
  local end=$((${EPOCHREALTIME/./} + $1 * 100000)) pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do running "$pid" && alive=1; done
    [ "$alive" = 0 ] && return 0
    [ "${EPOCHREALTIME/./}" -ge "$end" ] && return 1
    sleep 0.1
  done
}
stop prometheus ray-operator kwok kube-controller-manager kube-scheduler
stop kube-apiserver postgres
stop etcd
if [ -f "$STATE/postgres.dir" ]; then
  case $(cat "$STATE/postgres.dir") in */ray-stack-postgres.*) rm -rf "$(cat "$STATE/postgres.dir")" ;; esac
  rm -f "$STATE/postgres.dir"
fi
