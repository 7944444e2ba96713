package ray

// ClusterRef names a Ray cluster: its namespace and name. The watch cache, the idle detection and the
// utilization name clusters by it.
type ClusterRef struct{ Namespace, Name string }

// String is namespace/name.
func (r ClusterRef) String() string { return r.Namespace + "/" + r.Name }
