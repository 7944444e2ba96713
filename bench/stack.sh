#!/usr/bin/env bash
# The list benchmark against the local stack: a stack of its own (its own state directory and ports), a
# service against it, then bench/stack (seed, wait, measure, write docs/benchmarks.md), then everything
# stopped. Loopback only. Extra arguments go to bench/stack (e.g. -objects 100000 -profile DIR; -watch 1000
# for the watch stream benchmark, which writes docs/benchmarks-watch.md).
# RAY_SERVICE_BIN names another service binary to measure (e.g. one built from an earlier commit).
set -euo pipefail
cd "$(dirname "$0")/.."
state=$(mktemp -d)
export ETCD_PORT=32379 APISERVER_PORT=36443 KCM_PORT=36257 SCHED_PORT=36259 KWOK_PORT=37250
export OPERATOR_METRICS_PORT=38080 OPERATOR_PROBE_PORT=38081 PROM_PORT=39090
# One fake node large enough for the thousand Ray pods of the running RayClusters.
export NUM_NODES=1 NODE_CPU=2000 NODE_MEMORY=4000Gi NODE_PODS=2000
svc=""
cleanup() {
  set +e
  [ -n "$svc" ] && kill "$svc" 2>/dev/null && wait "$svc" 2>/dev/null
  stack/down.sh "$state"
  rm -rf "$state"
}
trap cleanup EXIT
WITH_KWOK_METRICS=0 stack/up.sh "$state" # the service's figures, without KWOK emulating usage alongside
source "$state/env"
bin=${RAY_SERVICE_BIN:-bin/ray-service}
"$bin" --listen 127.0.0.1:18088 --kubeconfig "$SERVICE_KUBECONFIG" --prometheus-url "$PROMETHEUS_URL" \
  --template-key-file "$TEMPLATE_KEY_FILE" --audit-key-file "$AUDIT_KEY_FILE" --pprof-listen 127.0.0.1:18090 --log-level warn \
  --max-watches 20000 --max-watches-per-caller 0 2>"$state/logs/ray-service.log" &
svc=$!
for _ in $(seq 1 120); do curl -sf http://127.0.0.1:18088/readyz >/dev/null && break; sleep 0.5; done
go run ./bench/stack -env "$state/env" -service http://127.0.0.1:18088 -pprof http://127.0.0.1:18090 -service-bin "$bin" -service-pid "$svc" "$@"
