#!/usr/bin/env bash
# `make run`: the service in the foreground.
# - RAY_SERVICE_KUBECONFIG set (or running in a pod): only the service, against that cluster.
# - otherwise: starts the local stack (building it on first use), runs the service against it with the
#   ray-service user's credentials, and writes .run/env for curl. Ctrl-C stops the service and the stack.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin/ray-service
if [ -n "${RAY_SERVICE_KUBECONFIG:-}" ] || [ -n "${KUBERNETES_SERVICE_HOST:-}" ]; then
  exec "$BIN" "$@"
fi

STATE=$(pwd)/.run/stack
LISTEN=${RAY_SERVICE_LISTEN:-127.0.0.1:8080}
stack/down.sh "$STATE" # a stack left by an earlier run that was killed
stack/up.sh "$STATE"
pid=""
cleanup() {
  trap - INT TERM EXIT
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  echo "stopping the local stack" >&2
  stack/down.sh "$STATE"
}
trap cleanup INT TERM EXIT
source "$STATE/env"

cat >.run/env <<ENV
export RAY_SERVICE_URL=http://$LISTEN
export KUBECONFIG=$KUBECONFIG
export ADMIN_TOKEN=$ADMIN_TOKEN
export VIEWER_TOKEN=$VIEWER_TOKEN
export NOBODY_TOKEN=$NOBODY_TOKEN
ENV
chmod 600 .run/env
cat >&2 <<MSG

ray-service on the local stack. In another shell:

  source .run/env
  curl -s \$RAY_SERVICE_URL/readyz
  curl -s -H "Authorization: Bearer \$ADMIN_TOKEN" \$RAY_SERVICE_URL/rest/ray/v1/rayclusters
  curl -s -H "Authorization: Bearer \$ADMIN_TOKEN" -H 'Content-Type: application/yaml' \\
       --data-binary @examples/raycluster.yaml \$RAY_SERVICE_URL/rest/ray/v1/namespaces/default/rayclusters
  kubectl get pods -A          (kubectl is in $(dirname "$(command -v kubectl)"))

Ctrl-C stops the service and the stack.

MSG
# The service reaches Ray dashboards through the same loopback proxy setting as the operator.
HTTP_PROXY=$OPERATOR_HTTP_PROXY NO_PROXY=127.0.0.1,localhost \
  "$BIN" --listen "$LISTEN" --kubeconfig "$SERVICE_KUBECONFIG" --prometheus-url "$PROMETHEUS_URL" "$@" &
pid=$!
wait "$pid"
