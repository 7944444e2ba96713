package ray

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ClusterOptions are the options of a Ray cluster spec a user needs to know of at a glance, as KubeRay
// v1.7.0 declares them (ray-project/kuberay v1.7.0 ray-operator/apis/ray/v1/raycluster_types.go:
// RayClusterSpec authOptions, tlsOptions, gcsFaultToleranceOptions, networkPolicy, historyServerOptions;
// HeadGroupSpec enableIngress and ingressOptions), read from the cluster spec of every kind. Several are
// behind alpha feature gates of the operator (tlsOptions: RayClusterMTLS); the summary says what the
// spec asks for. Strings are cut: names and hosts to MaxNameBytes, words to MaxWordBytes.
type ClusterOptions struct {
	// Auth is how the Ray dashboard and GCS take their callers (authOptions): "token" (mode token, a
	// static token in a Secret), "kubernetes" (mode token with enableK8sTokenAuth: callers' Kubernetes
	// tokens), "disabled" (mode disabled, or authOptions without token mode: KubeRay turns token
	// authentication on only for mode token, controllers/ray/utils/util.go IsAuthEnabled); absent
	// without authOptions.
	Auth string `json:"auth,omitempty" enums:"token,kubernetes,disabled"`
	// AuthSecret is authOptions.secretName: the Secret holding the token, where the author names it
	// (else KubeRay makes one named after the cluster).
	AuthSecret string `json:"authSecret,omitempty"`
	// MTLS: tlsOptions.enabled; the operator provisions certificates with cert-manager and Ray talks
	// mTLS inside the cluster.
	MTLS bool `json:"mtls,omitempty"`
	// GCSFaultTolerance is gcsFaultToleranceOptions.backend: "redis" (an external Redis; the default) or
	// "rocksdb" (embedded, on a volume of the head pod); absent without GCS fault tolerance.
	GCSFaultTolerance string `json:"gcsFaultTolerance,omitempty" example:"rocksdb"`
	// NetworkPolicy is networkPolicy.mode (DenyAll, its default; DenyAllIngress; DenyAllEgress): the
	// NetworkPolicies the operator makes for the head and workers; absent without networkPolicy.
	NetworkPolicy string `json:"networkPolicy,omitempty" example:"DenyAllIngress"`
	// HistoryCollector: historyServerOptions.collectorOptions is set; a collector sidecar sends the
	// cluster's logs and events to the Ray history server.
	HistoryCollector bool `json:"historyCollector,omitempty"`
	// Ingress: headGroupSpec.enableIngress; the operator makes an Ingress for the head's dashboard, at
	// IngressHost and IngressPath (headGroupSpec.ingressOptions; any host and "/" where unset).
	Ingress     bool   `json:"ingress,omitempty"`
	IngressHost string `json:"ingressHost,omitempty"`
	IngressPath string `json:"ingressPath,omitempty"`
	// Notes say the above in words, for a list or a detail header.
	Notes []string `json:"notes,omitempty" example:"mTLS on,GCS fault tolerance: rocksdb (embedded)"`
}

// clusterOptionsOf reads the options of a cluster spec; nil where it sets none of them.
func clusterOptionsOf(spec map[string]any) *ClusterOptions {
	o := ClusterOptions{}
	if auth, ok := nestedMap(spec, "authOptions"); ok {
		mode, _, _ := unstructured.NestedString(auth, "mode")
		k8sAuth, _, _ := unstructured.NestedBool(auth, "enableK8sTokenAuth")
		switch {
		case mode == "token" && k8sAuth:
			o.Auth = "kubernetes"
		case mode == "token":
			o.Auth = "token"
		default:
			o.Auth = "disabled"
		}
		secret, _, _ := unstructured.NestedString(auth, "secretName")
		o.AuthSecret = Clip(secret, MaxNameBytes)
	}
	o.MTLS, _, _ = unstructured.NestedBool(spec, "tlsOptions", "enabled")
	if ft, ok := nestedMap(spec, "gcsFaultToleranceOptions"); ok {
		backend, _, _ := unstructured.NestedString(ft, "backend")
		if backend == "" {
			backend = "redis" // GcsFaultToleranceOptions.Backend: "Defaults to redis"
		}
		o.GCSFaultTolerance = Clip(backend, MaxWordBytes)
	}
	if np, ok := nestedMap(spec, "networkPolicy"); ok {
		mode, _, _ := unstructured.NestedString(np, "mode")
		if mode == "" {
			mode = "DenyAll" // NetworkPolicyConfig.Mode: +kubebuilder:default=DenyAll
		}
		o.NetworkPolicy = Clip(mode, MaxWordBytes)
	}
	if _, ok := nestedMap(spec, "historyServerOptions", "collectorOptions"); ok {
		o.HistoryCollector = true
	}
	o.Ingress, _, _ = unstructured.NestedBool(spec, "headGroupSpec", "enableIngress")
	if o.Ingress {
		host, _, _ := unstructured.NestedString(spec, "headGroupSpec", "ingressOptions", "host")
		path, _, _ := unstructured.NestedString(spec, "headGroupSpec", "ingressOptions", "path")
		o.IngressHost, o.IngressPath = Clip(host, MaxNameBytes), Clip(path, MaxNameBytes)
	}
	// Every option set has its note.
	if o.Notes = o.notes(); len(o.Notes) == 0 {
		return nil
	}
	return &o
}

// notes says the options in words.
func (o *ClusterOptions) notes() []string {
	var n []string
	switch o.Auth {
	case "token":
		n = append(n, "token authentication on")
	case "kubernetes":
		n = append(n, "token authentication on, by Kubernetes tokens")
	case "disabled":
		n = append(n, "token authentication off")
	}
	if o.MTLS {
		n = append(n, "mTLS on")
	}
	switch o.GCSFaultTolerance {
	case "":
	case "rocksdb":
		n = append(n, "GCS fault tolerance: rocksdb (embedded)")
	case "redis":
		n = append(n, "GCS fault tolerance: redis (external)")
	default:
		n = append(n, "GCS fault tolerance: "+o.GCSFaultTolerance)
	}
	if o.NetworkPolicy != "" {
		n = append(n, "network policy: "+o.NetworkPolicy)
	}
	if o.HistoryCollector {
		n = append(n, "history server collector on")
	}
	if o.Ingress {
		host := o.IngressHost
		if host == "" {
			host = "any host"
		}
		path := o.IngressPath
		if path == "" {
			path = "/"
		}
		n = append(n, fmt.Sprintf("ingress to the dashboard: %s, path %s", host, path))
	}
	return n
}
