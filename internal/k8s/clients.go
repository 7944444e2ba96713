// Package k8s makes the calls to Kubernetes that a caller's request needs, with the caller's own
// token so that RBAC and admission decide: create, replace, start, stop, scale and delete the objects
// of a kind, their templates, and read their pods, logs, events and endings.
package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"ray-service/internal/auth"
	"syscall"
	"time"

	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Clients are the Kubernetes clients of one caller, authenticated with the caller's bearer token only.
// They are made for every request, so they are only what the service calls: the Ray kinds through the
// dynamic client, and core/v1 (pods, logs, events, template ConfigMaps). A whole clientset would build
// some fifty REST clients per request.
type Clients struct {
	Dynamic dynamic.Interface
	Core    corev1client.CoreV1Interface
}

// ClientFactory makes clients that act as a caller. All of them share one connection pool to the
// apiserver; each request carries the caller's token and nothing of the service's own credentials.
type ClientFactory struct {
	base      *rest.Config
	transport http.RoundTripper
}

// NewClientFactory prepares per-caller clients for the apiserver that cfg points at. Only the server
// address, TLS trust settings and rate limits are taken from cfg; its credentials are dropped.
func NewClientFactory(cfg *rest.Config) (*ClientFactory, error) {
	anon := rest.AnonymousClientConfig(cfg)
	rt, err := rest.TransportFor(anon)
	if err != nil {
		return nil, fmt.Errorf("building apiserver transport: %w", err)
	}
	base := rest.CopyConfig(anon)
	// The TLS settings live in the shared transport now; a config may not carry both.
	base.TLSClientConfig = rest.TLSClientConfig{}
	base.QPS, base.Burst = 100, 200
	// Set once here: client-go otherwise derives it for every client made.
	base.UserAgent = rest.DefaultKubernetesUserAgent()
	return &ClientFactory{base: base, transport: markLost{rt}}, nil
}

// Config returns a rest.Config that authenticates as the caller with the given bearer token.
func (f *ClientFactory) Config(token string) *rest.Config {
	c := rest.CopyConfig(f.base)
	c.Transport = transport.NewBearerAuthRoundTripper(token, f.transport)
	return c
}

// ForToken returns the clients of the caller with the given bearer token.
func (f *ClientFactory) ForToken(token string) (*Clients, error) {
	c := f.Config(token)
	hc := &http.Client{Transport: c.Transport}
	dyn, err := dynamic.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	// core/v1 answers in protobuf, which decodes several times faster than JSON: an event list of a
	// busy namespace is the largest read of a detail.
	pc := rest.CopyConfig(c)
	pc.ContentType = "application/vnd.kubernetes.protobuf"
	pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	core, err := corev1client.NewForConfigAndClient(pc, hc)
	if err != nil {
		return nil, err
	}
	return &Clients{Dynamic: dyn, Core: core}, nil
}

// ReviewerFor returns the clients the caller's access reviews are made with: the authentication and
// authorization APIs alone, not a whole clientset (made for every review, which a clientset of every
// API group would make costly).
func (f *ClientFactory) ReviewerFor(token string) (auth.ReviewClients, error) {
	c := f.Config(token)
	hc := &http.Client{Transport: c.Transport}
	authz, err := authorizationv1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	authn, err := authenticationv1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	return reviewClients{authz, authn}, nil
}

type reviewClients struct {
	authz authorizationv1client.AuthorizationV1Interface
	authn authenticationv1client.AuthenticationV1Interface
}

func (c reviewClients) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return c.authz
}
func (c reviewClients) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return c.authn
}

// ended is why ctx ended, or nil. Its deadline may have passed before it says so: net's dial gives up
// at the deadline by its own clock.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// PatientDial dials as net.Dialer does, but while the address refuses connections it tries again
// every interval, for up to wait in all. A watch cache's list then waits out an apiserver restart and
// succeeds as soon as it is back, instead of failing into its reflector's backoff, which grows to
// 30 s (and is not configurable through an informer).
func PatientDial(wait, interval time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		deadline := time.Now().Add(wait)
		for {
			c, err := d.DialContext(ctx, network, addr)
			if why := ended(ctx); err != nil && why != nil {
				// The caller's context ended the dial (net reports its deadline as an i/o timeout).
				return nil, fmt.Errorf("%w: %w", why, err)
			}
			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
				return c, err
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(interval):
			}
		}
	}
}
