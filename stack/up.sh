#!/usr/bin/env bash
# Starts the local stack on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# KWOK with fake nodes, the KubeRay operator and Prometheus. Builds the binaries first when the cache
# lacks them. Writes $STATE/env (sourceable) and kubeconfigs, and records every PID in $STATE/pids so
# that down.sh stops exactly these processes.
#
#   stack/up.sh [STATE_DIR]        (default .run/stack)
#
# Nothing here listens on or connects to an address outside 127.0.0.0/8. The KubeRay operator reaches
# Ray dashboards by in-cluster names; its HTTP_PROXY (OPERATOR_HTTP_PROXY, a loopback address) keeps it
# from ever resolving them.
set -euo pipefail
source "$(dirname "$0")/env.sh"
STATE=$(mkdir -p "${1:-${RAY_STACK_STATE:-.run/stack}}" && cd "${1:-${RAY_STACK_STATE:-.run/stack}}" && pwd)
BIN=$("$STACK_DIR/build.sh")
QUEUE_CRDS=$("$STACK_DIR/crds.sh")
: "${ETCD_PORT:=12379}" "${APISERVER_PORT:=16443}" "${KCM_PORT:=16257}" "${SCHED_PORT:=16259}"
: "${KWOK_PORT:=17250}" "${OPERATOR_METRICS_PORT:=18080}" "${OPERATOR_PROBE_PORT:=18081}" "${PROM_PORT:=19090}"
: "${OPERATOR_HTTP_PROXY:=http://127.0.0.1:18265}" "${NUM_NODES:=2}" "${WITH_PROMETHEUS:=1}"
# PostgreSQL (Debian's) for the history's tests with several replicas; off unless asked for.
: "${WITH_POSTGRES:=0}" "${PG_PORT:=15432}"
# What pods use, emulated by KWOK and scraped by Prometheus (kwok-metrics.yaml); the benchmarks turn it off.
: "${WITH_KWOK_METRICS:=$WITH_PROMETHEUS}"
# The size of each fake node (the benchmark runs a thousand Ray pods on one).
: "${NODE_CPU:=32}" "${NODE_MEMORY:=128Gi}" "${NODE_PODS:=110}"
# Accelerators per fake node: enough that the suite's clusters, running side by side, never wait for one
# another (two nodes of 4 GPUs ran out when the idle tests overlapped the overview's).
: "${NODE_GPUS:=16}" "${NODE_NPUS:=32}"
SERVICE_CIDR=127.2.0.0/16

mkdir -p "$STATE"/{pki,logs,pids}
for f in "$STATE"/pids/*.pid; do
  [ -f "$f" ] || continue
  if kill -0 "$(cat "$f")" 2>/dev/null; then echo "up.sh: a stack already runs in $STATE (stack/down.sh $STATE)" >&2; exit 1; fi
  rm -f "$f"
done
# A start that fails or is interrupted stops what it had started, by the PIDs recorded so far.
ok=""
trap '[ -n "$ok" ] || "$STACK_DIR/down.sh" "$STATE"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
t0=$(date +%s%N)
say() { local ms=$(( ($(date +%s%N) - t0) / 1000000 )); printf "stack: %d.%03ds %s\n" $((ms / 1000)) $((ms % 1000)) "$*" >&2; }
start() { # name command...: own process group, PID recorded
  local name=$1; shift
  setsid "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pids/$name.pid"
}
wait_for() { # name seconds command...
  local name=$1 deadline=$(( $(date +%s) + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$STATE/pids/$name.pid")" 2>/dev/null; then
      echo "up.sh: $name exited:" >&2; tail -20 "$STATE/logs/$name.log" >&2; exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "up.sh: $name not ready in time:" >&2; tail -20 "$STATE/logs/$name.log" >&2; exit 1
    fi
    sleep 0.2
  done
  say "$name ready"
}
moddir() { (cd "$STACK_DIR/tools/$1" && GOFLAGS=-mod=mod GOPROXY=off go list -m -f '{{.Dir}}' "$2"); }
KUBERAY_DIR=$(moddir kuberay github.com/ray-project/kuberay/ray-operator)
KWOK_DIR=$(moddir kwok sigs.k8s.io/kwok)
# The Gateway API the operator builds against (a dependency of its module): its incremental RayService
# upgrades write a Gateway and an HTTPRoute, which the tests accept as a gateway controller would.
GATEWAY_DIR=$(moddir kuberay sigs.k8s.io/gateway-api)

# PKI and users, once per state directory.
P=$STATE/pki
if [ ! -f "$P/sa.key" ]; then
  cert() { # name CN
    openssl req -newkey rsa:2048 -nodes -keyout "$P/$1.key" -out "$P/$1.csr" -subj "/CN=$2" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$P/$1.ext"
    openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -out "$P/$1.crt" \
      -days 3650 -extfile "$P/$1.ext" 2>/dev/null
  }
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" -days 3650 -subj "/CN=ray-stack-ca" 2>/dev/null
  cert apiserver kube-apiserver
  cert kwok kwok-kubelet
  openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
  openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
  : >"$STATE/tokens.csv"
  for user in admin ray-service viewer nobody alice bob carol; do
    tok=$(openssl rand -hex 24)
    group=""; [ "$user" = admin ] && group=',"system:masters"'
    echo "$tok,$user,uid-$user$group" >>"$STATE/tokens.csv"
  done
  chmod 600 "$STATE/tokens.csv"
fi
# The keys ray-service signs its templates and its audit trail with, once per state directory.
[ -f "$STATE/template.key" ] || (umask 077 && openssl rand -hex 32 >"$STATE/template.key")
[ -f "$STATE/audit.key" ] || (umask 077 && openssl rand -hex 32 >"$STATE/audit.key")
token() { awk -F, -v u="$1" '$2 == u {print $1}' "$STATE/tokens.csv"; }
kubeconfig() { # file user
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$P/ca.crt"}}]
users: [{name: $2, user: {token: "$(token "$2")"}}]
contexts: [{name: local, context: {cluster: local, user: $2, namespace: default}}]
current-context: local
KC
  chmod 600 "$1"
}
kubeconfig "$STATE/admin.kubeconfig" admin
kubeconfig "$STATE/service.kubeconfig" ray-service
KC=$STATE/admin.kubeconfig
kubectl() { "$BIN/kubectl" --kubeconfig="$KC" "$@"; }

rm -rf "$STATE/etcd"
start etcd "$BIN/etcd" --name local --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "local=http://127.0.0.1:$((ETCD_PORT + 1))" --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 2))" \
  --unsafe-no-fsync --log-level warn
wait_for etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# Kubernetes' own gang scheduling (Workload and PodGroup, scheduling.k8s.io/v1beta1) is beta in 1.37 and off
# by default: the GenericWorkload gate on the apiserver (which serves the resources only with the beta
# version enabled: pkg/registry/scheduling/rest/storage_scheduling.go, pkg/controlplane/instance.go), the
# scheduler (its GangScheduling plugin: pkg/scheduler/apis/config/v1/default_plugins.go) and the
# controller-manager (PodGroup protection).
# No kubelet runs, so nothing would clear not-ready taints: TaintNodesByCondition is off. The endpoint
# reconciler cannot publish a loopback address, so it is off too.
start kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --client-ca-file="$P/ca.crt" --token-auth-file="$STATE/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
  --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
  --kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$P/ca.crt" \
  --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true
wait_for kube-apiserver 120 kubectl get --raw /readyz

kubectl apply --server-side --force-conflicts -f "$KUBERAY_DIR/config/crd/bases" >"$STATE/logs/apply.log"
kubectl apply --server-side --force-conflicts -f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml" \
  -f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_clusterlogs.yaml" -f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_metrics.yaml" \
  -f "$KWOK_DIR/kustomize/crd/bases/kwok.x-k8s.io_clusterresourceusages.yaml" >>"$STATE/logs/apply.log"
kubectl apply --server-side -f "$GATEWAY_DIR/config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml" \
  -f "$GATEWAY_DIR/config/crd/standard/gateway.networking.k8s.io_gateways.yaml" \
  -f "$GATEWAY_DIR/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" >>"$STATE/logs/apply.log"
# Volcano's PodGroup and Queue CRDs (the operator runs with the Volcano batch scheduler, below; tests
# play Volcano's scheduler by writing PodGroup status) and Kueue's Workload, LocalQueue and ClusterQueue
# (no Kueue controller runs: tests play it by writing Workloads).
kubectl apply --server-side -f "$QUEUE_CRDS" >>"$STATE/logs/apply.log"
kubectl apply --server-side -f "$STACK_DIR/rbac.yaml" -f "$STACK_DIR/loopback-guard.yaml" >>"$STATE/logs/apply.log"
kubectl wait --for=condition=Established --timeout=60s crd/rayclusters.ray.io crd/rayjobs.ray.io \
  crd/rayservices.ray.io crd/gateways.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io crd/logs.kwok.x-k8s.io crd/clusterlogs.kwok.x-k8s.io crd/metrics.kwok.x-k8s.io \
  crd/clusterresourceusages.kwok.x-k8s.io crd/podgroups.scheduling.volcano.sh crd/queues.scheduling.volcano.sh \
  crd/workloads.kueue.x-k8s.io crd/localqueues.kueue.x-k8s.io crd/clusterqueues.kueue.x-k8s.io >>"$STATE/logs/apply.log"
if [ "$WITH_KWOK_METRICS" = 1 ]; then
  kubectl apply --server-side -f "$STACK_DIR/kwok-metrics.yaml" >>"$STATE/logs/apply.log"
fi
say "CRDs established"

# Pods of a Ray cluster KubeRay hands to Volcano name the scheduler "volcano": a second profile of
# kube-scheduler places them (the stack runs no Volcano scheduler; its gang decisions are the tests'
# to write, in the PodGroup's status).
cat >"$STATE/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$KC"}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
- schedulerName: volcano
YAML
start kube-scheduler "$BIN/kube-scheduler" --config="$STATE/scheduler.yaml" \
  --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --feature-gates=GenericWorkload=true
# node-lifecycle-controller would taint the fake nodes, which no kubelet heartbeats for.
start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KC" --leader-elect=false \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --controllers='*,-node-lifecycle-controller' \
  --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" --service-cluster-ip-range="$SERVICE_CIDR" \
  --feature-gates=GenericWorkload=true
stages=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-delete.yaml)
start kwok "$BIN/kwok" --kubeconfig="$KC" --config="$STACK_DIR/kwok.yaml" \
  $(for s in "${stages[@]}"; do printf -- '--config=%s ' "$KWOK_DIR/kustomize/stage/$s"; done) \
  --config="$STACK_DIR/kwok-stages.yaml" \
  --server-address="127.0.0.1:$KWOK_PORT" --node-port="$KWOK_PORT" --enable-crds=Logs,ClusterLogs,Metric,ClusterResourceUsage \
  --tls-cert-file="$P/kwok.crt" --tls-private-key-file="$P/kwok.key"
start ray-operator env HTTP_PROXY="$OPERATOR_HTTP_PROXY" http_proxy="$OPERATOR_HTTP_PROXY" NO_PROXY=127.0.0.1,localhost \
  "$BIN/ray-operator" --kubeconfig="$KC" --enable-leader-election=false \
  --metrics-addr="127.0.0.1:$OPERATOR_METRICS_PORT" --health-probe-bind-address="127.0.0.1:$OPERATOR_PROBE_PORT" \
  --log-stdout-encoder=console --batch-scheduler=volcano \
  --feature-gates=RayClusterStatusConditions=true,RayJobDeletionPolicy=true,RayCronJob=true,RayServiceIncrementalUpgrade=true
if [ "$WITH_PROMETHEUS" = 1 ]; then
  mkdir -p "$STATE/prom-targets"; rm -rf "$STATE/prometheus"
  # KWOK's per-node endpoints: cAdvisor and kube-state-metrics as kube-prometheus-stack scrapes them
  # (honorLabels: true), and the exporters as their monitors do, without honorLabels: DCGM as its
  # chart's exporter pod, npu-exporter as its own, the Ray nodes' and dashboards' ports as a PodMonitor
  # names them (endpoint). Series KWOK writes that the real exporter would not (label emit="false", see
  # kwok-metrics.yaml) are dropped.
  kwok_scrape=""
  if [ "$WITH_KWOK_METRICS" = 1 ]; then
    kwok_scrape="- job_name: kwok
  scheme: https
  honor_labels: true
  tls_config: {ca_file: '$P/ca.crt'}
  static_configs:"
    exporters_scrape="- job_name: kwok-exporters
  scheme: https
  honor_labels: false
  tls_config: {ca_file: '$P/ca.crt'}
  metric_relabel_configs:
  - {source_labels: [emit], regex: 'false', action: drop}
  - {regex: emit, action: labeldrop}
  static_configs:"
    for i in $(seq 0 $((NUM_NODES - 1))); do
      for m in cadvisor kube-state; do
        kwok_scrape+="
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/kwok-node-$i/metrics/$m, node: kwok-node-$i}}"
      done
      exporters_scrape+="
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/kwok-node-$i/metrics/dcgm, namespace: gpu-operator, pod: nvidia-dcgm-exporter-$i, container: nvidia-dcgm-exporter, endpoint: gpu-metrics}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/kwok-node-$i/metrics/npu, namespace: npu-exporter, pod: npu-exporter-$i, container: npu-exporter, endpoint: http}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/kwok-node-$i/metrics/ray, node: kwok-node-$i, endpoint: metrics}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/kwok-node-$i/metrics/ray-dashboard, node: kwok-node-$i, endpoint: dash-metrics}}"
    done
    # The sliced nodes (below) are scraped as the others are: their pods' series and the exporters' of
    # their slices.
    for n in kwok-vnpu-0 kwok-gpu-sliced-0; do
      for m in cadvisor kube-state; do
        kwok_scrape+="
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/$n/metrics/$m, node: $n}}"
      done
      exporters_scrape+="
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/$n/metrics/dcgm, namespace: gpu-operator, pod: nvidia-dcgm-exporter-$n, container: nvidia-dcgm-exporter, endpoint: gpu-metrics}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/$n/metrics/npu, namespace: npu-exporter, pod: npu-exporter-$n, container: npu-exporter, endpoint: http}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/$n/metrics/ray, node: $n, endpoint: metrics}}
  - {targets: ['127.0.0.1:$KWOK_PORT'], labels: {__metrics_path__: /metrics/nodes/$n/metrics/ray-dashboard, node: $n, endpoint: dash-metrics}}"
    done
    kwok_scrape+="
$exporters_scrape"
  fi
  cat >"$STATE/prometheus.yml" <<PROM
global: {scrape_interval: 5s, evaluation_interval: 5s}
scrape_configs:
- job_name: kuberay-operator
  static_configs: [{targets: ['127.0.0.1:$OPERATOR_METRICS_PORT']}]
- job_name: extra
  file_sd_configs: [{files: ['$STATE/prom-targets/*.json'], refresh_interval: 5s}]
$kwok_scrape
PROM
  start prometheus prometheus --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/prometheus" \
    --web.listen-address="127.0.0.1:$PROM_PORT"
fi

if [ "$WITH_POSTGRES" = 1 ]; then
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$PG_BIN/postgres" ] || { echo "up.sh: WITH_POSTGRES=1 needs Debian's postgresql package" >&2; exit 1; }
  # PostgreSQL refuses to run as root: as root it runs as Debian's postgres user, in a directory of its
  # own (the state directory may sit where that user cannot go), which down.sh removes.
  as_pg=()
  PGDATA=$STATE/postgres
  if [ "$(id -u)" = 0 ]; then
    PGDATA=$(cat "$STATE/postgres.dir" 2>/dev/null || mktemp -d "${TMPDIR:-/tmp}/ray-stack-postgres.XXXXXX")
    echo "$PGDATA" >"$STATE/postgres.dir"
    chown postgres: "$PGDATA"
    as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups)
  fi
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    "${as_pg[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U ray --auth=trust -E UTF8 >"$STATE/logs/initdb.log" 2>&1
  fi
  start postgres "${as_pg[@]}" "$PG_BIN/postgres" -D "$PGDATA" -h 127.0.0.1 -p "$PG_PORT" -k "$PGDATA" \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500
  wait_for postgres 30 "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"
  HISTORY_POSTGRES_DSN="postgres://ray@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
fi

wait_for kube-scheduler 60 curl -sfk "https://127.0.0.1:$SCHED_PORT/healthz"
wait_for kube-controller-manager 60 curl -sfk "https://127.0.0.1:$KCM_PORT/healthz"
wait_for ray-operator 60 curl -sf "http://127.0.0.1:$OPERATOR_PROBE_PORT/readyz"
[ "$WITH_PROMETHEUS" = 1 ] && wait_for prometheus 60 curl -sf "http://127.0.0.1:$PROM_PORT/-/ready"

for i in $(seq 0 $((NUM_NODES - 1))); do cat <<NODE
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: kwok-node-$i, type: kwok}
status:
  allocatable: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", nvidia.com/gpu: "$NODE_GPUS", huawei.com/Ascend910: "$NODE_NPUS"}
  capacity: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", nvidia.com/gpu: "$NODE_GPUS", huawei.com/Ascend910: "$NODE_NPUS"}
NODE
done | kubectl apply -f - >>"$STATE/logs/apply.log"
# Nodes whose devices are sliced, labelled as their device plugins label them and tainted so that only
# the pods that ask for slices land there: an Ascend node whose two 32-core chips are cut into static
# 4-core vNPUs (mind-cluster v26.1.0 ascend-device-plugin: servertype <card>-<AI cores>, accelerator,
# node.kubernetes.io/npu.chip.name; resource huawei.com/Ascend910-4c, pkg/server/manager.go:54-61,
# 281-295, pkg/common/constants.go), and an NVIDIA node under the mixed MIG strategy, two H100s cut into
# 3g.40gb instances and two more shared four ways by time-slicing, renamed (NVIDIA k8s-device-plugin
# v0.20.0 and its GPU feature discovery: nvidia.com/mig-3g.40gb, nvidia.com/gpu.shared, labels
# nvidia.com/gpu.product, .replicas, .sharing-strategy, mig.strategy, mig-<profile>.count and
# .slices.gi; internal/lm/resource.go, mig-strategy.go).
cat <<NODES | kubectl apply -f - >>"$STATE/logs/apply.log"
apiVersion: v1
kind: Node
metadata:
  name: kwok-vnpu-0
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: kwok-vnpu-0, type: kwok,
    accelerator: huawei-Ascend910, servertype: Ascend910-32, node.kubernetes.io/npu.chip.name: 910ProA}
spec:
  taints: [{key: ray-service.local/sliced, value: "true", effect: NoSchedule}]
status:
  allocatable: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", huawei.com/Ascend910-4c: "16"}
  capacity: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", huawei.com/Ascend910-4c: "16"}
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-gpu-sliced-0
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: kwok-gpu-sliced-0, type: kwok,
    nvidia.com/gpu.product: H100-80GB-HBM3, nvidia.com/gpu.count: "4", nvidia.com/gpu.replicas: "4",
    nvidia.com/gpu.sharing-strategy: time-slicing, nvidia.com/mig.capable: "true", nvidia.com/mig.strategy: mixed,
    nvidia.com/mig-3g.40gb.count: "4", nvidia.com/mig-3g.40gb.slices.gi: "3", nvidia.com/mig-3g.40gb.product: H100-80GB-HBM3-MIG-3g.40gb}
spec:
  taints: [{key: ray-service.local/sliced, value: "true", effect: NoSchedule}]
status:
  allocatable: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", nvidia.com/mig-3g.40gb: "4", nvidia.com/gpu.shared: "8"}
  capacity: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS", nvidia.com/mig-3g.40gb: "4", nvidia.com/gpu.shared: "8"}
NODES
# A node whose GPUs are handed out through Dynamic Resource Allocation (resource.k8s.io/v1, GA and on by
# default in Kubernetes 1.37: the apiserver serves it, the scheduler's DynamicResources plugin allocates,
# the controller-manager's resourceclaim controller makes claims of templates; nothing to turn on), as
# NVIDIA's DRA driver publishes it (NVIDIA/k8s-dra-driver-gpu v0.4.0): its chart's DeviceClass
# (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml), and the ResourceSlice its
# kubelet plugin writes for the node (pool = the node's name, the name the slice controller generates,
# k8s.io/dynamic-resource-allocation v0.37.2 resourceslice/resourceslicecontroller.go:924-930): four
# whole H100s gpu-<minor> with their attributes and memory capacity as cmd/gpu-kubelet-plugin/
# deviceinfo.go:106-108, 152-205 and partitions.go:34-44 name them (values as NVML and go-nvlib give them:
# name, "Hopper", "Nvidia"). The node has no nvidia.com/gpu of a device plugin, is labelled as node
# feature discovery labels an NVIDIA node (the chart's kubelet plugin affinity, values.yaml:288-300) and
# tainted as the sliced nodes are.
{
  cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-dra-0
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: kwok-dra-0, type: kwok,
    feature.node.kubernetes.io/pci-10de.present: "true"}
spec:
  taints: [{key: ray-service.local/sliced, value: "true", effect: NoSchedule}]
status:
  allocatable: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS"}
  capacity: {cpu: "$NODE_CPU", memory: $NODE_MEMORY, pods: "$NODE_PODS"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: 0-gpu.nvidia.com-kwok-dra-0-stack
spec:
  driver: gpu.nvidia.com
  nodeName: kwok-dra-0
  pool: {name: kwok-dra-0, generation: 1, resourceSliceCount: 1}
  devices:
NODE
  for i in 0 1 2 3; do cat <<DEV
  - name: gpu-$i
    attributes:
      type: {string: gpu}
      uuid: {string: GPU-00000000-0000-0000-0000-00000000000$i}
      productName: {string: NVIDIA H100 80GB HBM3}
      brand: {string: Nvidia}
      architecture: {string: Hopper}
      cudaComputeCapability: {version: 9.0.0}
      driverVersion: {version: 580.95.5}
      cudaDriverVersion: {version: 13.0.0}
      resource.kubernetes.io/pciBusID: {string: "0000:1$i:00.0"}
    capacity:
      memory: {value: 80Gi}
DEV
  done
} | kubectl apply -f - >>"$STATE/logs/apply.log"
wait_for kwok 60 kubectl wait --for=condition=Ready --timeout=1s node --all
wait_for kwok 30 curl -sfk "https://127.0.0.1:$KWOK_PORT/healthz"

cat >"$STATE/env" <<ENV
export PATH="$BIN:\$PATH"
export STACK_BIN="$BIN"
export STACK_STATE="$STATE"
export KUBECONFIG="$STATE/admin.kubeconfig"
export SERVICE_KUBECONFIG="$STATE/service.kubeconfig"
export KUBE_APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
export ETCD_URL=http://127.0.0.1:$ETCD_PORT
export KUBE_CA_FILE="$P/ca.crt"
export ADMIN_TOKEN=$(token admin)
export VIEWER_TOKEN=$(token viewer)
export NOBODY_TOKEN=$(token nobody)
export ALICE_TOKEN=$(token alice)
export BOB_TOKEN=$(token bob)
export CAROL_TOKEN=$(token carol)
export PROMETHEUS_URL=http://127.0.0.1:$PROM_PORT
export OPERATOR_HTTP_PROXY=$OPERATOR_HTTP_PROXY
export KWOK_LOGS_DIR="$STATE/pod-logs"
export TEMPLATE_KEY_FILE="$STATE/template.key"
export AUDIT_KEY_FILE="$STATE/audit.key"
export HISTORY_POSTGRES_DSN="${HISTORY_POSTGRES_DSN:-}"
ENV
mkdir -p "$STATE/pod-logs"
ok=1
say "stack ready: source $STATE/env"
