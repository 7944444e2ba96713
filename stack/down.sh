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
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null; done
  for name in "$@"; do rm -f "$STATE/pids/$name.pid"; done
}
stop prometheus ray-operator kwok kube-controller-manager kube-scheduler
stop kube-apiserver postgres
stop etcd
if [ -f "$STATE/postgres.dir" ]; then
  case $(cat "$STATE/postgres.dir") in */ray-stack-postgres.*) rm -rf "$(cat "$STATE/postgres.dir")" ;; esac
  rm -f "$STATE/postgres.dir"
fi
