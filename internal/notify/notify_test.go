package notify

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func prefixes(t *testing.T, list ...string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes(list)
	require.NoError(t, err)
	return p
}

func TestParsePrefixes(t *testing.T) {
	p, err := ParsePrefixes([]string{"10.96.0.0/12", "192.0.2.7", "fd00::/8", "::1", "10.1.2.3/8"})
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/12"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"),
	}, p)

	_, err = ParsePrefixes([]string{"10.0.0.0/8", "cluster.local"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"cluster.local"`)
	_, err = ParsePrefixes([]string{"10.0.0.0/33"})
	assert.ErrorContains(t, err, `"10.0.0.0/33"`)
}

// By default every address that is not public is refused: a subscriber, who needs only namespace rights,
// must not reach through the service what only the cluster reaches (its Services and pods, the kubelets,
// the cloud's metadata service). The operator allows ranges; the cluster's own ranges stay refused.
func TestGuardRefuses(t *testing.T) {
	g := &Guard{Deny: prefixes(t, "10.96.0.0/12", "fd10::/64")}
	allowing := &Guard{Allow: prefixes(t, "127.0.0.0/8", "10.0.0.0/8", "fd00::/8"), Deny: g.Deny}

	for _, c := range []struct {
		guard *Guard
		addr  string
		want  string // "" when allowed
	}{
		{g, "127.0.0.1", "127.0.0.1 is loopback"},
		{g, "127.8.9.10", "127.8.9.10 is loopback"},
		{g, "::1", "::1 is loopback"},
		{g, "::ffff:127.0.0.1", "is loopback"},
		{g, "169.254.169.254", "169.254.169.254 is link-local"},
		{g, "fe80::1", "fe80::1 is link-local"},
		{g, "fe80::1%eth0", "is link-local"},
		{g, "ff02::1", "ff02::1 is multicast"},
		{g, "224.0.0.1", "224.0.0.1 is multicast"},
		{g, "0.0.0.0", `0.0.0.0 is of "this network"`},
		{g, "::", ":: is unspecified"},
		{g, "239.1.2.3", "239.1.2.3 is multicast"},
		{g, "255.255.255.255", "is reserved"},
		{g, "10.0.0.1", "10.0.0.1 is private (10.0.0.0/8, RFC 1918)"},
		{g, "172.20.1.1", "is private (172.16.0.0/12"},
		{g, "192.168.1.1", "is private (192.168.0.0/16"},
		{g, "100.100.100.200", "is shared address space (100.64.0.0/10"},
		{g, "fd00::1", "is unique-local"},
		{g, "fc00::1", "is unique-local"},
		{g, "192.0.2.1", "is for documentation"},
		{g, "198.51.100.1", "is for documentation"},
		{g, "203.0.113.1", "is for documentation"},
		{g, "2001:db8::1", "is for documentation"},
		{g, "198.18.0.1", "is for benchmarking"},
		{g, "2001:2::1", "2001::/23"},
		{g, "2002:a00:1::", "is 6to4"},
		{g, "fec0::1", "is site-local"},
		{g, "::10.0.0.1", "is not IPv6 global unicast"},
		{g, "64:ff9b::a00:1", "64:ff9b::a00:1 carries an IPv4 address that is private (10.0.0.0/8"},
		{g, "64:ff9b::7f00:1", "carries an IPv4 address that is loopback"},
		{g, "64:ff9b:1::1", "local-use NAT64"},
		{g, "10.96.0.1", "10.96.0.1 is in the cluster's range 10.96.0.0/12"},
		{g, "::ffff:10.96.0.1", "is in the cluster's range 10.96.0.0/12"},
		{g, "64:ff9b::a60:1", "is in the cluster's range 10.96.0.0/12"},
		{g, "fd10::5", "fd10::5 is in the cluster's range fd10::/64"},
		{g, "93.184.216.34", ""},
		{g, "2606:4700::1", ""},
		{g, "64:ff9b::5db8:d822", ""}, // 93.184.216.34 through NAT64
		{&Guard{}, "10.96.0.1", "is private"},
		{(*Guard)(nil), "127.0.0.1", "127.0.0.1 is loopback"},
		{(*Guard)(nil), "10.1.2.3", "is private"},
		{allowing, "127.0.0.1", ""},
		{allowing, "::ffff:127.0.0.1", ""},
		{allowing, "10.1.2.3", ""},
		{allowing, "fd00::1", ""},
		{allowing, "64:ff9b::a00:1", ""},
		{allowing, "::1", "::1 is loopback"},
		{allowing, "192.168.1.1", "is private"},
		{allowing, "10.96.5.9", "10.96.5.9 is in the cluster's range 10.96.0.0/12"}, // the cluster's ranges win
		{allowing, "fd10::5", "is in the cluster's range fd10::/64"},
	} {
		got := c.guard.Refuses(netip.MustParseAddr(c.addr))
		if c.want == "" {
			assert.Empty(t, got, c.addr)
		} else {
			assert.Contains(t, got, c.want, c.addr)
		}
	}
	assert.Contains(t, g.Refuses(netip.Addr{}), "is not a valid address")
}

func TestCheckURL(t *testing.T) {
	g := &Guard{Deny: prefixes(t, "10.96.0.0/12")}
	ctx := context.Background()
	resolved := map[string][]netip.Addr{
		"good.example":   {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:4700::1")},
		"inside.example": {netip.MustParseAddr("10.3.4.5")},
		"mixed.example":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.96.0.10")},
		"meta.example":   {netip.MustParseAddr("169.254.169.254")},
		"empty.example":  {},
	}
	var looked []string
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		looked = append(looked, host)
		a, ok := resolved[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		return a, nil
	}

	for _, ok := range []string{"https://good.example/hook", "http://good.example:8080/x?y=1", "http://93.184.216.34/", "https://[2606:4700::1]:443/"} {
		require.NoError(t, g.CheckURL(ctx, ok, lookup), ok)
	}

	for _, c := range []struct{ url, reason string }{
		{"ftp://good.example/x", `its scheme is "ftp"`},
		{"good.example/hook", `its scheme is ""`},
		{"https://user:pass@good.example/hook", "user information"},
		{"https://token@good.example/hook", "user information"},
		{"http:///hook", "it has no host"},
		{"http://mixed.example/hook", "its host resolves to an address that is in the cluster's range 10.96.0.0/12"},
		{"http://meta.example/", "its host resolves to an address that is link-local"},
		{"http://inside.example:8265/api/jobs/x/stop", "its host resolves to an address that is private (10.0.0.0/8"},
		{"http://empty.example/", "resolves to no address"},
		{"http://nowhere.example/", "its host does not resolve"},
		{"http://10.1.2.3:8265/api/jobs/x/stop", "10.1.2.3 is private"},
		{"http://100.100.100.200/latest/meta-data", "is shared address space"},
		{"http://[fd00::1]/", "is unique-local"},
		{"http://169.254.169.254/x", "169.254.169.254 is link-local (169.254.0.0/16; clouds' metadata services); an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it"},
		{"http://[::ffff:127.0.0.1]/x", "127.0.0.1 is loopback"},
		{"http://[fe80::1%25eth0]/x", "is link-local"},
		{"http://10.96.0.1/x", "10.96.0.1 is in the cluster's range 10.96.0.0/12"},
		{"http://bad url/", "not a URL"},
	} {
		err := g.CheckURL(ctx, c.url, lookup)
		var refused *RefusedError
		if assert.ErrorAs(t, err, &refused, c.url) {
			assert.Contains(t, refused.Reason, c.reason, c.url)
			assert.True(t, strings.HasPrefix(err.Error(), "the webhook address "), err.Error())
			assert.NotContains(t, err.Error(), "10.3.4.5", "the address a name resolves to is not told")
		}
	}

	err := g.CheckURL(ctx, "http://169.254.169.254/x", lookup)
	require.EqualError(t, err, "the webhook address http://169.254.169.254/x is refused: 169.254.169.254 is link-local "+
		"(169.254.0.0/16; clouds' metadata services); an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it")

	// Credentials never reach the message.
	err = g.CheckURL(ctx, "https://user:s3cret@good.example/hook", lookup)
	assert.NotContains(t, err.Error(), "s3cret")

	// A literal address is not resolved.
	looked = nil
	require.NoError(t, g.CheckURL(ctx, "http://93.184.216.34/", lookup))
	assert.Empty(t, looked)

	allowing := &Guard{Allow: prefixes(t, "10.0.0.0/8"), Deny: g.Deny}
	require.Error(t, allowing.CheckURL(ctx, "http://mixed.example/hook", lookup), "an allowed range does not open the cluster's")
	require.NoError(t, allowing.CheckURL(ctx, "http://inside.example/hook", lookup), "the operator allows a private range")
}

func TestControl(t *testing.T) {
	g := &Guard{Allow: prefixes(t, "127.0.0.2")}
	assert.NoError(t, g.Control("tcp4", "93.184.216.34:443", nil))
	assert.NoError(t, g.Control("tcp4", "127.0.0.2:80", nil))
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "[fe80::1%eth0]:80", "[::ffff:169.254.169.254]:80", "somewhere:80"} {
		var refused *RefusedError
		assert.ErrorAs(t, g.Control("tcp", addr, nil), &refused, addr)
	}
}

// receiver is a subscriber's webhook on loopback that keeps what it received.
type receiver struct {
	srv    *httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	body   []byte
	header http.Header
}

func newReceiver(t *testing.T, status int, answer string) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		if req.URL.Path == "/elsewhere" {
			t.Error("the redirect was followed")
		}
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.body, r.header = body, req.Header.Clone()
		r.mu.Unlock()
		if status == http.StatusFound {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func loopbackGuard(t *testing.T) *Guard {
	return &Guard{Allow: prefixes(t, "127.0.0.0/8", "::1/128")}
}

var notice = Notice{
	Seq: 42, Type: "job.succeeded",
	Kind: "RayJob", Namespace: "team-a", Name: "train", UID: "0b6c5a8e-1111-2222-3333-444455556666",
	Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
	Data: map[string]any{"jobId": "raysubmit_1", "kind": "shadowed"},
}

func TestSend(t *testing.T) {
	r := newReceiver(t, http.StatusAccepted, "")
	s := &Sender{Client: loopbackGuard(t).Client(5 * time.Second), Source: "/ray-service/namespaces/team-a", UserAgent: "ray-service/test"}
	const secret = "s3cret"
	require.NoError(t, s.Send(context.Background(), Target{URL: r.srv.URL + "/hook", Secret: secret}, notice))
	r.mu.Lock()
	defer r.mu.Unlock()

	assert.Equal(t, "application/cloudevents+json; charset=utf-8", r.header.Get("Content-Type"))
	assert.Equal(t, "ray-service/test", r.header.Get("User-Agent"))
	sig := r.header.Get(SignatureHeader)
	assert.True(t, strings.HasPrefix(sig, "sha256="), sig)
	assert.True(t, Verify(secret, r.body, sig))
	assert.False(t, Verify("other", r.body, sig))

	var e event.Event
	require.NoError(t, json.Unmarshal(r.body, &e))
	require.NoError(t, e.Validate())
	assert.Equal(t, "1.0", e.SpecVersion())
	assert.Equal(t, "com.openfuyao.ray.job.succeeded", e.Type())
	assert.Equal(t, "42", e.ID())
	assert.Equal(t, "/ray-service/namespaces/team-a", e.Source())
	assert.Equal(t, "RayJob/train", e.Subject())
	assert.True(t, notice.Time.Equal(e.Time()))
	assert.Equal(t, "application/json", e.DataContentType())

	var data map[string]any
	require.NoError(t, e.DataAs(&data))
	assert.Equal(t, map[string]any{
		"kind": "RayJob", "namespace": "team-a", "name": "train", "uid": notice.UID,
		"type": "job.succeeded", "time": "2025-03-04T05:06:07Z", "jobId": "raysubmit_1",
	}, data)

	// Structured mode: the data is a JSON object in the envelope, not base64.
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &raw))
	assert.Contains(t, raw, "data")
	assert.NotContains(t, raw, "data_base64")
}

// A receiver's answer comes back as its status code alone: not its body, not its reason phrase (both the
// receiver's text, which made the delivery log a way to read what a webhook inside the network answers).
// A redirect is an answer, not followed.
func TestSendAnswers(t *testing.T) {
	ctx := context.Background()
	client := loopbackGuard(t).Client(5 * time.Second)

	r := newReceiver(t, http.StatusInternalServerError, "database down"+strings.Repeat(".", 1000))
	err := (&Sender{Client: client}).Send(ctx, Target{URL: r.srv.URL, Secret: "x"}, notice)
	require.EqualError(t, err, "the webhook "+r.srv.URL+"/… answered 500 Internal Server Error")

	r = newReceiver(t, http.StatusFound, "")
	err = (&Sender{Client: client}).Send(ctx, Target{URL: r.srv.URL + "/hook", Secret: "x"}, notice)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "302")
	assert.Contains(t, err.Error(), "redirects are not followed")
	assert.Equal(t, int32(1), r.hits.Load())

	// A reason phrase of the receiver's own.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, "HTTP/1.1 418 root:x:0:0 from the inside\r\nContent-Length: 0\r\n\r\n")
			}()
		}
	}()
	err = (&Sender{Client: client}).Send(ctx, Target{URL: "http://" + ln.Addr().String() + "/", Secret: "x"}, notice)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "answered 418")
	assert.NotContains(t, err.Error(), "root")
}

// A redirect to an address the guard refuses is not followed: the receiver cannot send the service
// inside the network by answering 307 (which a client that follows redirects would post to again).
func TestSendNeverFollowsRedirects(t *testing.T) {
	var inside atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { inside.Add(1) }))
	t.Cleanup(target.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/api/jobs/raysubmit_1/stop", code)
		}))
		err := (&Sender{Client: loopbackGuard(t).Client(5 * time.Second)}).Send(context.Background(), Target{URL: hostile.URL, Secret: "x"}, notice)
		hostile.Close()
		require.Error(t, err, "%d", code)
		assert.Contains(t, err.Error(), "redirects are not followed")
		assert.NotContains(t, err.Error(), "raysubmit_1", "the Location is not shown")
	}
	assert.Zero(t, inside.Load(), "no redirect was followed")
}

// A receiver that answers slowly, trickles its header, or never ends its body holds a try no longer than
// the client's time bound; a huge answer is not read beyond a bound, nor a compressed one inflated.
func TestSendBoundsHostileReceivers(t *testing.T) {
	const bound = 500 * time.Millisecond
	client := loopbackGuard(t).Client(bound)
	release := make(chan struct{})
	defer close(release) // before the servers' Close, which waits for their handlers
	var written atomic.Int64
	handlers := map[string]http.HandlerFunc{
		"silent": func(http.ResponseWriter, *http.Request) { <-release },
		"trickle": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				select {
				case <-release:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		},
		"endless": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			chunk := []byte(strings.Repeat("y", 32<<10))
			for {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		},
		"header": func(w http.ResponseWriter, _ *http.Request) {
			for i := range 200 {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("z", 1000))
			}
			w.WriteHeader(http.StatusOK)
		},
		"gzip": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(http.StatusInternalServerError)
			gz := gzip.NewWriter(w)
			zeros := make([]byte, 1<<20)
			for range 1024 { // a gigabyte inflated
				if _, err := gz.Write(zeros); err != nil {
					return
				}
			}
			_ = gz.Close()
		},
	}
	for name, h := range handlers {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		began := time.Now()
		err := (&Sender{Client: client}).Send(context.Background(), Target{URL: srv.URL, Secret: "x"}, notice)
		took := time.Since(began)
		if name != "trickle" { // a 2xx is a delivery, whatever its body does after
			require.Error(t, err, name)
		}
		assert.Less(t, took, bound+2*time.Second, "%s: a try is bounded in time", name)
		if name == "endless" {
			assert.Less(t, written.Load(), int64(16<<20), "an endless answer is not read")
		}
	}
}

// Every try that got no answer says the same, and takes the same time: the delivery log tells a closed
// port from a silent one no more than it tells them from a host that is down.
func TestSendNoAnswerLooksTheSame(t *testing.T) {
	const bound = 300 * time.Millisecond
	client := loopbackGuard(t).Client(bound)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	reset, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = reset.Close() })
	go func() {
		for {
			c, err := reset.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	tlsOnly := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(tlsOnly.Close)
	var shown []string
	for _, u := range []string{"http://" + closedAddr + "/", "http://" + silent.Addr().String() + "/", "http://" + reset.Addr().String() + "/", tlsOnly.URL + "/"} {
		began := time.Now()
		err := (&Sender{Client: client}).Send(context.Background(), Target{URL: u, Secret: "x"}, notice)
		require.Error(t, err)
		assert.GreaterOrEqual(t, time.Since(began), bound, "%s: no sooner than the bound", u)
		host := strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
		shown = append(shown, strings.Replace(strings.Replace(err.Error(), host, "HOST/", 1), "https://", "http://", 1))
		for _, word := range []string{"refused", "reset", "timeout", "deadline", "tls", "certificate", "EOF"} {
			assert.NotContains(t, strings.ToLower(err.Error()), strings.ToLower(word), u)
		}
		require.Error(t, errors.Unwrap(err), "the cause is kept for the service's log")
	}
	assert.Equal(t, []string{shown[0], shown[0], shown[0], shown[0]}, shown)
}

func TestSendRefusedAtDial(t *testing.T) {
	r := newReceiver(t, http.StatusOK, "")
	for _, s := range []*Sender{{Client: (&Guard{}).Client(5 * time.Second)}, {}} {
		err := s.Send(context.Background(), Target{URL: r.srv.URL, Secret: "x"}, notice)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		assert.Contains(t, refused.Reason, "is loopback")
	}
	// A name is checked at dial time too, whatever it resolved to when subscribed.
	err := (&Sender{}).Send(context.Background(), Target{URL: strings.Replace(r.srv.URL, "127.0.0.1", "localhost", 1), Secret: "x"}, notice)
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, int32(0), r.hits.Load())
}

func TestEvent(t *testing.T) {
	_, err := Event(Notice{Seq: 1, Kind: "RayJob", Name: "a"}, "/ray-service")
	require.Error(t, err, "no type")
	_, err = Event(Notice{Seq: 1, Type: "job.failed", Data: map[string]any{"f": func() {}}}, "/ray-service")
	require.Error(t, err, "data not JSON")
	_, err = Event(Notice{Seq: 1, Type: "job.failed"}, "")
	require.Error(t, err, "no source")

	b, err := Event(Notice{Seq: 7, Type: "cluster.ready", Kind: "RayCluster", Name: "c"}, "/ray-service")
	require.NoError(t, err)
	var e event.Event
	require.NoError(t, json.Unmarshal(b, &e))
	assert.True(t, e.Time().IsZero(), "no time when the notice has none")
}

func TestSignVerify(t *testing.T) {
	body := []byte(`{"a":1}`)
	sig := Sign("k", body)
	assert.Regexp(t, `^sha256=[0-9a-f]{64}$`, sig)
	assert.True(t, Verify("k", body, sig))
	assert.False(t, Verify("k", []byte(`{"a":2}`), sig))
	assert.False(t, Verify("k", body, strings.TrimPrefix(sig, "sha256=")))
	assert.False(t, Verify("k", body, "sha256=zz"))
	assert.False(t, Verify("k", body, ""))

	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	assert.Len(t, a, 43)
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^[A-Za-z0-9_-]+$`, a)
}

func TestBackoff(t *testing.T) {
	for attempt, base := range map[int]time.Duration{
		-1: time.Second, 0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		9: 256 * time.Second, 10: 5 * time.Minute, 30: 5 * time.Minute, 100: 5 * time.Minute, 1 << 30: 5 * time.Minute,
	} {
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		for range 200 {
			d := Backoff(attempt)
			assert.GreaterOrEqual(t, d, lo, attempt)
			assert.LessOrEqual(t, d, hi, attempt)
		}
	}
	// Jittered: not all the same.
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[Backoff(5)] = true
	}
	assert.Greater(t, len(seen), 1)
}
