module ray-service/test/compat/kuberay15

go 1.26.0

// The KubeRay v1.5.0 operator module, for its CRD manifests only (config/crd/bases): the compatibility
// test installs them on an apiserver of its own. Nothing here is built.
require github.com/ray-project/kuberay/ray-operator v1.5.0
