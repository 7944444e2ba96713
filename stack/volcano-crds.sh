#!/usr/bin/env bash
# Makes Volcano's PodGroup and Queue CRDs (scheduling.volcano.sh/v1beta1) from the API types of the
# volcano.sh/apis version pinned in tools/crdgen, with the controller-gen pinned there, as Volcano makes
# its own (they are the same bytes as volcano v1.13.0's config/crd/volcano/bases). Once per version of
# that module: prints the directory that holds them.
set -euo pipefail
source "$(dirname "$0")/env.sh"
GEN=$STACK_DIR/../tools/crdgen
key=$(cat "$GEN/go.mod" "$GEN/go.sum" | sha256sum | cut -c1-16)
OUT=$STACK_CACHE/volcano-crds-$key
if [ -f "$OUT/scheduling.volcano.sh_podgroups.yaml" ] && [ -f "$OUT/scheduling.volcano.sh_queues.yaml" ]; then
  echo "$OUT"; exit 0
fi
mkdir -p "$STACK_CACHE"
tmp=$(mktemp -d "$STACK_CACHE/volcano-crds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
s=$(date +%s)
(cd "$GEN" && go tool controller-gen "crd:crdVersions=v1,generateEmbeddedObjectMeta=true" \
  paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 "output:crd:artifacts:config=$tmp")
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
echo "build: volcano CRDs $(( $(date +%s) - s ))s" >&2
echo "$OUT"
