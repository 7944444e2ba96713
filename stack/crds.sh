#!/usr/bin/env bash
# The queue managers' CRDs the local stack installs, once per version: prints the directory that holds
# them. Volcano's PodGroup and Queue (scheduling.volcano.sh/v1beta1) are made from the API types of the
# volcano.sh/apis version pinned in tools/crdgen, with the controller-gen pinned there, as Volcano makes
# its own (the same bytes as volcano v1.13.0's config/crd/volcano/bases; no module on the Go module proxy
# ships them). Kueue's Workload, LocalQueue and ClusterQueue are copied from the config/components/crd/bases
# of the sigs.k8s.io/kueue version pinned in tools/kueue-crds.
set -euo pipefail
source "$(dirname "$0")/env.sh"
GEN=$STACK_DIR/../tools/crdgen
KUEUE=$STACK_DIR/../tools/kueue-crds
key=$(cat "$GEN/go.mod" "$GEN/go.sum" "$KUEUE/go.mod" "$KUEUE/go.sum" | sha256sum | cut -c1-16)
OUT=$STACK_CACHE/crds-$key
if [ -f "$OUT/done" ]; then
  echo "$OUT"; exit 0
fi
mkdir -p "$STACK_CACHE"
tmp=$(mktemp -d "$STACK_CACHE/crds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
s=$(date +%s)
(cd "$GEN" && go tool controller-gen "crd:crdVersions=v1,generateEmbeddedObjectMeta=true" \
  paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 "output:crd:artifacts:config=$tmp")
kueue=$(cd "$KUEUE" && go mod download sigs.k8s.io/kueue && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
for r in workloads localqueues clusterqueues; do cp "$kueue/config/components/crd/bases/kueue.x-k8s.io_$r.yaml" "$tmp/"; done
chmod u+w "$tmp"/*.yaml
touch "$tmp/done"
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
echo "build: queue managers' CRDs $(( $(date +%s) - s ))s" >&2
echo "$OUT"
