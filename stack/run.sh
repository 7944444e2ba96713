#!/usr/bin/env bash
# `make run`: the service in the foreground.
# - RAY_SERVICE_KUBECONFIG set (or running in a pod): only the service, against that cluster.
# - otherwise: starts the local stack (building it on first use), runs the service against it with the
#   ray-service user's credentials, and writes .run/env for curl. Ctrl-C stops the service and the stack.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin/ray-service
if [ -n "${RAY_SERVICE_KUBECONFIG:-}" ] || [ -n "${KUBERNETES_SERVICE_HOST:-}" ]; then
  # Templates are signed with a key of this service's own: without one given, a key kept under .run/.
  # Templates another service wrote with its own key are not trusted by this one, nor the reverse.
  if [ -z "${RAY_SERVICE_TEMPLATE_KEY_FILE:-}" ]; then
    mkdir -p .run
    [ -f .run/template.key ] || (umask 077 && openssl rand -hex 32 >.run/template.key)
    export RAY_SERVICE_TEMPLATE_KEY_FILE=$PWD/.run/template.key
  fi
  # The audit trail likewise, with a key of its own.
  if [ -z "${RAY_SERVICE_AUDIT_KEY_FILE:-}" ]; then
    mkdir -p .run
    [ -f .run/audit.key ] || (umask 077 && openssl rand -hex 32 >.run/audit.key)
    export RAY_SERVICE_AUDIT_KEY_FILE=$PWD/.run/audit.key
  fi
  # The history in a file under .run/, unless a DSN is given (a pod keeps the default, on its volume).
  if [ -z "${RAY_SERVICE_HISTORY_DSN+set}" ] && [ -z "${KUBERNETES_SERVICE_HOST:-}" ]; then
    mkdir -p .run
    export RAY_SERVICE_HISTORY_DSN=sqlite:$PWD/.run/history.db
  fi
  exec "$BIN" "$@"
fi
# No load balancer sends to the service on the local stack: Ctrl-C need not wait out a shutdown delay.
export RAY_SERVICE_SHUTDOWN_DELAY=${RAY_SERVICE_SHUTDOWN_DELAY:-0s}

STATE=${RAY_STACK_STATE:-$(pwd)/.run/stack}
RUN_ENV=$(dirname "$STATE")/env
LISTEN=${RAY_SERVICE_LISTEN:-127.0.0.1:8080}
# The Ray dashboards on an origin of their own: what a tenant's dashboard serves never runs on the API's.
DASHBOARD_LISTEN=${RAY_SERVICE_DASHBOARD_LISTEN:-127.0.0.1:8081}
# The service's own metrics apart from the API, as in the chart (the RayCronJobs' and idle clusters' series
# are served there only).
METRICS_LISTEN=${RAY_SERVICE_METRICS_LISTEN:-127.0.0.1:9091}
pid=""
up=""
watcher=""
# Every way out stops the service and the stack: a signal to the process group (a terminal's Ctrl-C,
# systemd, `timeout`), a signal to make alone, a failed up.sh, or the service exiting by itself.
cleanup() {
  # A signal to the group has often ended the service (or the watcher) already, so a kill below may
  # fail: under `set -e` that failure would end the script before down.sh. GNU make also forwards
  # SIGTERM to its children, so a second signal may come: it must not cut the clean-up short either.
  set +e
  trap '' INT TERM HUP
  trap - EXIT
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  [ -n "$up" ] && kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  echo "stopping the local stack" >&2
  stack/down.sh "$STATE"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP
trap cleanup EXIT
# GNU make passes SIGINT and SIGHUP on to nobody (it expects the whole group to get them) and then
# waits for its children. When make alone is signalled, its handler restores the signal's default
# action, so the signal leaves make's caught set (SigCgt): that, or make going away, stops us.
if [ "$(cat /proc/$PPID/comm 2>/dev/null)" = make ]; then
  parent=$PPID
  caught() { awk '/^SigCgt:/ {print $2}' "/proc/$parent/status" 2>/dev/null; }
  want=$(caught)
  (
    trap - INT TERM HUP EXIT
    while [ "$(caught)" = "$want" ]; do sleep 0.5; done
    kill -TERM $$ 2>/dev/null
  ) &
  watcher=$!
fi
stack/down.sh "$STATE" # a stack left by an earlier run that was killed
# In the background, so that a signal is handled at once, not when up.sh is done (bash runs a trap
# only between commands).
stack/up.sh "$STATE" &
up=$!
wait "$up"
up=""
source "$STATE/env"
# Idle policies stop idle RayClusters as an identity of their own (stack/idle-stop.yaml), as the chart's do.
kubectl apply --server-side -f stack/idle-stop.yaml >/dev/null

cat >"$RUN_ENV" <<ENV
export RAY_SERVICE_URL=http://$LISTEN
export RAY_DASHBOARD_URL=http://$DASHBOARD_LISTEN
export RAY_SERVICE_METRICS_URL=http://$METRICS_LISTEN/metrics
export KUBECONFIG=$KUBECONFIG
export ADMIN_TOKEN=$ADMIN_TOKEN
export VIEWER_TOKEN=$VIEWER_TOKEN
export NOBODY_TOKEN=$NOBODY_TOKEN
ENV
chmod 600 "$RUN_ENV"
cat >&2 <<MSG

ray-service on the local stack. In another shell:

  source .run/env
  curl -s \$RAY_SERVICE_URL/readyz
  curl -s -H "Authorization: Bearer \$ADMIN_TOKEN" \$RAY_SERVICE_URL/rest/ray/v1/rayclusters
  curl -s -H "Authorization: Bearer \$ADMIN_TOKEN" -H 'Content-Type: application/yaml' \\
       --data-binary @examples/raycluster.yaml \$RAY_SERVICE_URL/rest/ray/v1/namespaces/default/rayclusters
  kubectl get pods -A          (kubectl is in $(dirname "$(command -v kubectl)"))

Ray dashboards are served on their own origin, \$RAY_DASHBOARD_URL (a detail's dashboardURL names it).

Ctrl-C stops the service and the stack.

MSG
# The service reaches Ray dashboards through the same loopback proxy setting as the operator.
HTTP_PROXY=$OPERATOR_HTTP_PROXY NO_PROXY=127.0.0.1,localhost \
  "$BIN" --listen "$LISTEN" --dashboard-listen "$DASHBOARD_LISTEN" --kubeconfig "$SERVICE_KUBECONFIG" --prometheus-url "$PROMETHEUS_URL" \
  --template-key-file "$TEMPLATE_KEY_FILE" --audit-key-file "$AUDIT_KEY_FILE" --history-dsn "${RAY_SERVICE_HISTORY_DSN:-sqlite:$(dirname "$STATE")/history.db}" \
  --metrics-listen "$METRICS_LISTEN" --idle-stop-identity default/ray-service-idle-stop \
  --lease-namespace default "$@" &
pid=$!
wait "$pid"
