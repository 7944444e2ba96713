// Package notify holds the delivery of notifications to subscribers' webhooks: CloudEvents 1.0 in
// structured JSON, signed, through a guard that keeps the service from being used against the cluster.
package notify

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// allowHint tells how an operator lets a refused address through.
const allowHint = " (an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it)"

// Guard decides which addresses webhooks may reach. An address is refused when it is in Deny (the
// cluster's own service and pod ranges, set by the operator) or is loopback, link-local, unspecified,
// multicast or interface-local, unless it is in Allow: Allow wins.
type Guard struct {
	Allow []netip.Prefix
	Deny  []netip.Prefix
}

// RefusedError is a webhook address the guard refuses, or one it cannot check.
type RefusedError struct {
	URL    string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the webhook address %s is refused: %s", e.URL, e.Reason)
}

// ParsePrefixes reads CIDRs and single addresses (taken as /32 or /128).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address: %w", s, err)
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Refuses returns why the guard refuses a, or "" when it allows it.
func (g *Guard) Refuses(a netip.Addr) string {
	if why := g.refusal(a); why != "" {
		return a.String() + " " + why
	}
	return ""
}

// refusal is Refuses without the address in front: "is loopback".
func (g *Guard) refusal(a netip.Addr) string {
	if !a.IsValid() {
		return "is not a valid address"
	}
	// Prefixes never contain zoned addresses, and 127.0.0.1 may come as ::ffff:127.0.0.1.
	a = a.Unmap().WithZone("")
	if g != nil {
		// The cluster's ranges stay refused whatever is allowed: an allowed 10.0.0.0/8 does not open them.
		for _, p := range g.Deny {
			if p.Contains(a) {
				return "is in the cluster's range " + p.String()
			}
		}
		for _, p := range g.Allow {
			if p.Contains(a) {
				return ""
			}
		}
	}
	switch {
	case a.IsLoopback():
		return "is loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "is link-local"
	case a.IsInterfaceLocalMulticast():
		return "is interface-local"
	case a.IsUnspecified():
		return "is unspecified"
	case a.IsMulticast():
		return "is multicast"
	}
	return ""
}

// CheckURL tells whether a webhook URL may be subscribed: http or https, a host and no user
// information (credentials in URLs end up in logs), and every address of the host allowed. lookup
// resolves the host; nil uses net.DefaultResolver. The dial is checked again (see Control), since
// what a name resolves to may change.
func (g *Guard) CheckURL(ctx context.Context, raw string, lookup func(ctx context.Context, host string) ([]netip.Addr, error)) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &RefusedError{URL: raw, Reason: "it is not a URL"}
	}
	shown := u.Redacted()
	refused := func(format string, args ...any) error {
		return &RefusedError{URL: shown, Reason: fmt.Sprintf(format, args...)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return refused("its scheme is %q, not http or https", u.Scheme)
	}
	if u.User != nil {
		return refused("it holds user information, and credentials in a URL end up in logs")
	}
	host := u.Hostname()
	if host == "" {
		return refused("it has no host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := g.Refuses(a); why != "" {
			return refused("%s%s", why, allowHint)
		}
		return nil
	}
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return refused("its host does not resolve: %v", err)
	}
	if len(addrs) == 0 {
		return refused("its host resolves to no address")
	}
	for _, a := range addrs {
		if why := g.refusal(a); why != "" {
			return refused("its host resolves to %s, which %s%s", a, why, allowHint)
		}
	}
	return nil
}

// Control checks the address a connection is about to reach, for net.Dialer.Control: the address
// dialed is the one that counts, whatever the name resolved to when the URL was checked.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{URL: address, Reason: fmt.Sprintf("the %s address dialed is not an IP address and port", network)}
	}
	if why := g.Refuses(ap.Addr()); why != "" {
		return &RefusedError{URL: address, Reason: why + allowHint}
	}
	return nil
}

// Client returns an HTTP client for webhooks: each connection goes through the guard, never through a
// proxy (which would dial for it, unchecked), and redirects are answers, not followed.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
	tr.DialContext = d.DialContext
	tr.DialTLSContext = nil
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
