#!/usr/bin/env bash
# Builds every binary of the local stack from the Go module proxy, once per cache key (stack/env.sh).
# Prints the bin directory on its last line. Safe to run again: a complete cache returns at once.
set -euo pipefail
source "$(dirname "$0")/env.sh"
K8S_VERSION=v1.37.2
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok ray-operator helm)

complete() { local b; for b in "${BINARIES[@]}"; do [ -x "$STACK_BIN/$b" ] || return 1; done; }
if complete; then echo "$STACK_BIN"; exit 0; fi

# One build at a time per cache directory (make run and make test may race on a cold machine).
mkdir -p "$STACK_CACHE"
exec 9>"$STACK_CACHE/build.lock"
flock 9
if complete; then echo "$STACK_BIN"; exit 0; fi

tmp=$(mktemp -d "$STACK_CACHE/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
step() {
  local name=$1 dir=$2; shift 2
  local s; s=$(date +%s)
  "$STACK_DIR/gomod.sh" "$STACK_DIR/tools/$dir"
  (cd "$STACK_DIR/tools/$dir" && go build -trimpath "$@")
  echo "build: $name $(( $(date +%s) - s ))s" >&2
}
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
vpkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $vpkg.gitVersion=$K8S_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
# The four Kubernetes commands share most packages: one go build compiles them once.
step kubernetes k8s -ldflags "$k8s_ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
step etcd etcd -ldflags '-s -w' -o "$tmp/etcd" ./cmd/etcd
step kwok kwok -ldflags '-s -w' -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok
step ray-operator kuberay -ldflags '-s -w' -o "$tmp/ray-operator" github.com/ray-project/kuberay/ray-operator
step helm helm -ldflags '-s -w' -o "$tmp/helm" helm.sh/helm/v3/cmd/helm
mkdir -p "$(dirname "$STACK_BIN")"
rm -rf "$STACK_BIN"
mv "$tmp" "$STACK_BIN"
trap - EXIT
echo "build: all $(( $(date +%s) - t0 ))s" >&2
echo "$STACK_BIN"
