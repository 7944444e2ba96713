// Package dashboard reaches the Ray dashboards of the Ray clusters: where a cluster's dashboard is,
// and the calls the service makes to it.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"ray-service/internal/ray"
)

// Dashboards reaches Ray dashboards the way the KubeRay operator does: by the head service's in-cluster
// name, through a client that honours HTTP_PROXY and NO_PROXY.
type Dashboards struct {
	Client        *http.Client
	ClusterDomain string
}

// NewDashboards returns Dashboards for a cluster DNS domain. timeout bounds connecting to a dashboard
// and waiting for its answer's headers (0: 30 s); a whole call of the service's own, such as a job's
// stop, is bounded by it too.
func NewDashboards(clusterDomain string, timeout time.Duration) *Dashboards {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: min(timeout, 10*time.Second)}).DialContext,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
	}
	return &Dashboards{Client: &http.Client{Transport: transport, Timeout: timeout}, ClusterDomain: clusterDomain}
}

// inNamespaceZone returns host:port of a dashboard URL that names a service of namespace ns
// (<service>.<ns>.svc.<cluster domain>:<port>), and whether it does.
func (d *Dashboards) inNamespaceZone(dashboardURL, ns string) (string, bool) {
	addr := strings.TrimPrefix(strings.TrimPrefix(dashboardURL, "http://"), "https://")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false
	}
	svc, ok := strings.CutSuffix(host, "."+ns+".svc."+d.ClusterDomain)
	if !ok || len(validation.IsDNS1123Label(svc)) > 0 {
		return "", false
	}
	return addr, true
}

// Transport is how the dashboards are reached: through the HTTP proxy the environment names, if any.
func (d *Dashboards) Transport() http.RoundTripper { return d.Client.Transport }

// Address is host:port of the Ray dashboard of the cluster object o of kind k runs on (s is o's
// summary): what the operator recorded for a RayJob where it names a service of the object's own
// namespace, else <head service>.<namespace>.svc.<cluster domain>:<the head's dashboard port>. "" when
// the object has no cluster yet. Whoever may write an object's status cannot send the proxy anywhere
// else.
func (d *Dashboards) Address(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary) string {
	if v, _, _ := unstructured.NestedString(o.Object, "status", "dashboardURL"); v != "" {
		if addr, ok := d.inNamespaceZone(v, o.GetNamespace()); ok {
			return addr
		}
	}
	svc := k.HeadService(o, s)
	if svc == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.svc.%s:%d", svc, o.GetNamespace(), d.ClusterDomain, k.DashboardPort(o))
}

// StopJob asks the Ray dashboard at addr (host:port) to stop the Ray job jobID, through its job API
// (POST /api/jobs/{id}/stop), with the cluster's token where it takes one ("": none), sent as KubeRay
// sends it. The error says what the dashboard did: "is unreachable: ..." or "refused to stop job ...:
// <status> <body>".
func (d *Dashboards) StopJob(ctx context.Context, addr, jobID, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/jobs/"+url.PathEscape(jobID)+"/stop", nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set(ray.AuthHeader, "Bearer "+token)
	}
	res, err := d.Client.Do(req)
	if err != nil {
		return fmt.Errorf("is unreachable: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s %s", ErrNoSuchJob, res.Status, strings.TrimSpace(string(body)))
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("refused to stop job %s: %s %s", jobID, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// ErrNoSuchJob is StopJob's error when the dashboard knows no job of that ID (404: Ray's job API,
// dashboard/modules/job/job_head.py): KubeRay names the job before its submitter has submitted it.
var ErrNoSuchJob = errors.New("the Ray dashboard knows no such job")
