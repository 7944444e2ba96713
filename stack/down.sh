#!/usr/bin/env bash
# Stops what stack/up.sh started, by the PIDs it recorded, newest first. Never by process name.
#   stack/down.sh [STATE_DIR]
STATE=${1:-${RAY_STACK_STATE:-.run/stack}}
[ -d "$STATE/pids" ] || exit 0
for name in prometheus ray-operator kwok kube-controller-manager kube-scheduler kube-apiserver etcd; do
  f=$STATE/pids/$name.pid
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
  fi
  rm -f "$f"
done
