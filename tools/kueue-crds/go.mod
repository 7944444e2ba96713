// The Kueue version whose CRDs (config/components/crd/bases) the local stack installs (stack/crds.sh):
// Workloads, LocalQueues and ClusterQueues, for the tests that play Kueue's controller. Nothing of it is
// built.
module ray-service/tools/kueue-crds

go 1.26.8

require sigs.k8s.io/kueue v0.17.0 // indirect
