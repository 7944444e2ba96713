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
const allowHint = "; an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it"

// Guard decides which addresses webhooks may reach: public addresses only, by default. An address is
// refused when it is in Deny (the cluster's own service and pod ranges, set by the operator) or is not
// public (nonPublic: private, shared, loopback, link-local, documentation, benchmarking, multicast,
// reserved), unless it is in Allow: Allow wins over the latter, never over Deny. A subscriber needs no
// more than the right to create events in a namespace, and the service may reach every Ray dashboard,
// the kubelets and the cloud's metadata service: what it may call for a subscriber is what the internet
// may, as a code host's webhooks refuse the local network unless an administrator allows it.
type Guard struct {
	Allow []netip.Prefix
	Deny  []netip.Prefix
}

// special is a range of IANA's special-purpose address registries (RFC 6890 and those since) that is
// not globally reachable, named as a refusal tells it.
type special struct {
	prefix netip.Prefix
	name   string
}

func specials(list ...string) []special {
	out := make([]special, 0, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		out = append(out, special{netip.MustParsePrefix(list[i]), list[i+1]})
	}
	return out
}

// nonPublic are the ranges refused unless allowed: IANA's IPv4 and IPv6 special-purpose address
// registries, where an entry is not globally reachable, and every IPv6 address outside 2000::/3 (global
// unicast; see refusal). The well-known NAT64 prefix 64:ff9b::/96 is judged by the IPv4 address it
// carries (see embedded).
var nonPublic = specials(
	"0.0.0.0/8", "of \"this network\" (0.0.0.0/8)",
	"10.0.0.0/8", "private (10.0.0.0/8, RFC 1918)",
	"100.64.0.0/10", "shared address space (100.64.0.0/10, carrier-grade NAT; clouds' metadata services)",
	"127.0.0.0/8", "loopback (127.0.0.0/8)",
	"169.254.0.0/16", "link-local (169.254.0.0/16; clouds' metadata services)",
	"172.16.0.0/12", "private (172.16.0.0/12, RFC 1918)",
	"192.0.0.0/24", "of IETF protocol assignments (192.0.0.0/24)",
	"192.0.2.0/24", "for documentation (192.0.2.0/24)",
	"192.88.99.0/24", "6to4 relay anycast (192.88.99.0/24)",
	"192.168.0.0/16", "private (192.168.0.0/16, RFC 1918)",
	"198.18.0.0/15", "for benchmarking (198.18.0.0/15)",
	"198.51.100.0/24", "for documentation (198.51.100.0/24)",
	"203.0.113.0/24", "for documentation (203.0.113.0/24)",
	"224.0.0.0/4", "multicast (224.0.0.0/4)",
	"240.0.0.0/4", "reserved (240.0.0.0/4, with the broadcast address)",
	"::/128", "unspecified (::)",
	"::1/128", "loopback (::1)",
	"64:ff9b:1::/48", "local-use NAT64 (64:ff9b:1::/48)",
	"100::/64", "discard-only (100::/64)",
	"2001::/23", "of IETF protocol assignments (2001::/23, with Teredo and benchmarking)",
	"2001:db8::/32", "for documentation (2001:db8::/32)",
	"2002::/16", "6to4 (2002::/16, which carries an IPv4 address)",
	"3fff::/20", "for documentation (3fff::/20)",
	"5f00::/16", "SRv6 SIDs (5f00::/16)",
	"fc00::/7", "unique-local (fc00::/7)",
	"fe80::/10", "link-local (fe80::/10)",
	"fec0::/10", "site-local (fec0::/10)",
	"ff00::/8", "multicast (ff00::/8)",
)

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
)

// RefusedError is a webhook address the guard refuses, or one it cannot check.
type RefusedError struct {
	URL    string
	Reason string
	// Refusal is the reason without the address: "is loopback (127.0.0.0/8)".
	Refusal string
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

// refusal is Refuses without the address in front: "is loopback (127.0.0.0/8)".
func (g *Guard) refusal(a netip.Addr) string {
	if !a.IsValid() {
		return "is not a valid address"
	}
	// Prefixes never contain zoned addresses, and 127.0.0.1 may come as ::ffff:127.0.0.1.
	a = a.Unmap().WithZone("")
	if g != nil {
		// The cluster's ranges stay refused whatever is allowed: an allowed 10.0.0.0/8 does not open them.
		for _, p := range g.Deny {
			if p.Contains(a) || p.Contains(embedded(a)) {
				return "is in the cluster's range " + p.String()
			}
		}
		for _, p := range g.Allow {
			if p.Contains(a) {
				return ""
			}
		}
	}
	if e := embedded(a); e != a {
		if why := g.refusal(e); why != "" {
			return "carries an IPv4 address that " + why
		}
		return ""
	}
	for _, s := range nonPublic {
		if s.prefix.Contains(a) {
			return "is " + s.name
		}
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return "is not IPv6 global unicast (2000::/3)"
	}
	return ""
}

// embedded is the IPv4 address a NAT64 address of the well-known prefix carries (a translator reaches
// it for the service), or a itself.
func embedded(a netip.Addr) netip.Addr {
	if !nat64.Contains(a) {
		return a
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
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
		// The resolver's error names the cluster's DNS server: not the subscriber's business.
		return refused("its host does not resolve")
	}
	if len(addrs) == 0 {
		return refused("its host resolves to no address")
	}
	for _, a := range addrs {
		if why := g.refusal(a); why != "" {
			// Not the address itself: a name inside the cluster would tell the subscriber its Service's address.
			return refused("its host resolves to an address that %s%s", why, allowHint)
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
	if why := g.refusal(ap.Addr()); why != "" {
		return &RefusedError{URL: address, Reason: ap.Addr().String() + " " + why + allowHint, Refusal: why}
	}
	return nil
}

// maxAnswerHeader bounds the header of a receiver's answer: nothing of it but the status is used.
const maxAnswerHeader = 16 << 10

// Client returns an HTTP client for webhooks: each connection goes through the guard, never through a
// proxy (which would dial for it, unchecked), and redirects are answers, not followed (a receiver could
// otherwise send the service anywhere the guard does not look). A try takes at most timeout, whatever
// the receiver does (a slow answer, a trickled header, an endless body); an answer's header is bounded,
// and its body is never decompressed.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	d := &net.Dialer{Timeout: min(timeout, 30*time.Second), KeepAlive: 30 * time.Second, Control: g.Control}
	tr.DialContext = d.DialContext
	tr.DialTLSContext = nil
	tr.MaxResponseHeaderBytes = maxAnswerHeader
	tr.ResponseHeaderTimeout = timeout
	tr.DisableCompression = true
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
