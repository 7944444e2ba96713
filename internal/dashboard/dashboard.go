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

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"ray-service/internal/ray"
)

// Dashboards reaches Ray dashboards the way the KubeRay operator does: by the head service's in-cluster
// name, through a client that honours HTTP_PROXY and NO_PROXY.
//
// Whoever controls a head pod controls what its dashboard answers, so the calls of the service's own
// trust no answer beyond its status: a redirect is not followed (it would carry the cluster's token,
// which travels in a header of Ray's own, to wherever the head names), no answer's body, status text or
// malformed bytes reach the caller (who is told the status and what the service did), what is read of
// an answer is bounded in bytes as well as in time, and what a head said is logged in a bounded, quoted
// excerpt without the token.
type Dashboards struct {
	Client        *http.Client
	ClusterDomain string
	// Log takes what a dashboard answered beyond its status, for the service's operators (nil: nowhere).
	Log *zap.Logger
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
	return &Dashboards{ClusterDomain: clusterDomain, Client: &http.Client{Transport: transport, Timeout: timeout,
		// A redirect is the answer (an error naming its status), not an invitation to send the request
		// and the cluster's token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
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
// sends it. The error says what the dashboard did, in the service's words only: "is unreachable (...)",
// "answered ... with a redirect (<status>), which the service does not follow" or "refused to stop job
// ...: <status>"; ErrNoSuchJob where it knows no such job; ray.ErrTokenRequired where it answered 401 to
// a stop sent without a token.
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
		return d.unreachable(addr, "stop a job", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, excerptRead)) // the connection is reused if little is left
		return nil
	}
	d.logAnswer(addr, "stop a job", res, token)
	if res.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w (%s)", ErrNoSuchJob, statusOf(res.StatusCode))
	}
	if res.StatusCode == http.StatusUnauthorized && token == "" {
		return fmt.Errorf("%w (%s)", ray.ErrTokenRequired, statusOf(res.StatusCode))
	}
	if isRedirect(res.StatusCode) {
		return fmt.Errorf("answered the stop of job %s with a redirect (%s), which the service does not follow", jobID, statusOf(res.StatusCode))
	}
	return fmt.Errorf("refused to stop job %s: %s", jobID, statusOf(res.StatusCode))
}

// ErrNoSuchJob is StopJob's error when the dashboard knows no job of that ID (404: Ray's job API,
// dashboard/modules/job/job_head.py): KubeRay names the job before its submitter has submitted it.
var ErrNoSuchJob = errors.New("the Ray dashboard knows no such job")

// excerptRead bounds what is read of an answer that is not the one asked for; excerptLogged, what of it
// is logged.
const (
	excerptRead   = 4 << 10
	excerptLogged = 256
)

// statusOf is an answer's status in the service's words: its code and the code's standard text, never
// the text the dashboard sent with it.
func statusOf(code int) string {
	if text := http.StatusText(code); text != "" {
		return strconv.Itoa(code) + " " + text
	}
	return strconv.Itoa(code)
}

func isRedirect(code int) bool { return code >= 300 && code < 400 }

// logAnswer logs what the dashboard at addr answered to call beyond its status: where a redirect points,
// and the start of the body, quoted, without the cluster's token (which a hostile head may echo).
func (d *Dashboards) logAnswer(addr, call string, res *http.Response, token string) {
	if d.Log == nil {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, excerptRead))
	fields := []zap.Field{zap.String("address", addr), zap.String("call", call), zap.Int("status", res.StatusCode),
		zap.String("contentType", excerpt([]byte(res.Header.Get("Content-Type")), token)), zap.String("body", excerpt(body, token))}
	if loc := res.Header.Get("Location"); loc != "" {
		fields = append(fields, zap.String("location", excerpt([]byte(loc), token)))
	}
	d.Log.Info("a Ray dashboard did not answer as asked", fields...)
}

// excerpt is the start of what a dashboard sent, quoted (no control characters reach the log), with the
// cluster's token taken out.
func excerpt(b []byte, token string) string {
	s := string(b)
	if token != "" {
		s = strings.ReplaceAll(s, token, "[Ray token]")
	}
	if len(s) > excerptLogged {
		s = s[:excerptLogged] + "..."
	}
	return strconv.Quote(s)
}

// unreachable is the error of a call the dashboard at addr gave no HTTP answer to: what happened, in the
// service's words (the transport's own error may quote what the head sent instead of HTTP), the
// transport's error logged. It wraps err, so that a caller who left is told apart.
func (d *Dashboards) unreachable(addr, call string, err error) error {
	if d.Log != nil {
		d.Log.Info("a Ray dashboard did not answer", zap.String("address", addr), zap.String("call", call),
			zap.String("error", excerpt([]byte(err.Error()), "")))
	}
	var netErr net.Error
	var opErr *net.OpError
	what := "it did not answer in HTTP"
	switch {
	case errors.Is(err, context.Canceled):
		what = "the request was cancelled"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		what = "it did not answer in time"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		what = "it could not be connected to"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &opErr):
		what = "the connection ended before its answer"
	}
	return &callError{msg: "is unreachable (" + what + ")", cause: err}
}

// callError says what went wrong in the service's words; it wraps the cause, whose text it never shows.
type callError struct {
	msg   string
	cause error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.cause }
