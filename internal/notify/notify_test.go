package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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

func TestGuardRefuses(t *testing.T) {
	g := &Guard{Deny: prefixes(t, "10.96.0.0/12", "fd10::/64")}
	allowing := &Guard{Allow: prefixes(t, "127.0.0.0/8", "10.96.5.0/24"), Deny: g.Deny}

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
		{g, "ff02::1", "ff02::1 is link-local"},
		{g, "224.0.0.1", "224.0.0.1 is link-local"},
		{g, "ff01::1", "ff01::1 is interface-local"},
		{g, "0.0.0.0", "0.0.0.0 is unspecified"},
		{g, "::", ":: is unspecified"},
		{g, "239.1.2.3", "239.1.2.3 is multicast"},
		{g, "ff0e::1", "ff0e::1 is multicast"},
		{g, "10.96.0.1", "10.96.0.1 is in the cluster's range 10.96.0.0/12"},
		{g, "::ffff:10.96.0.1", "is in the cluster's range 10.96.0.0/12"},
		{g, "fd10::5", "fd10::5 is in the cluster's range fd10::/64"},
		{g, "93.184.216.34", ""},
		{g, "10.0.0.1", ""},
		{g, "2001:db8::1", ""},
		{&Guard{}, "10.96.0.1", ""},
		{(*Guard)(nil), "127.0.0.1", "127.0.0.1 is loopback"},
		{allowing, "127.0.0.1", ""},
		{allowing, "::ffff:127.0.0.1", ""},
		{allowing, "::1", "::1 is loopback"},
		{allowing, "10.96.5.9", "10.96.5.9 is in the cluster's range 10.96.0.0/12"}, // the cluster's ranges win
		{allowing, "10.96.6.9", "10.96.6.9 is in the cluster's range 10.96.0.0/12"},
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
		"good.example":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2001:db8::1")},
		"mixed.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.96.0.10")},
		"meta.example":  {netip.MustParseAddr("169.254.169.254")},
		"empty.example": {},
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

	for _, ok := range []string{"https://good.example/hook", "http://good.example:8080/x?y=1", "http://93.184.216.34/", "https://[2001:db8::1]:443/"} {
		require.NoError(t, g.CheckURL(ctx, ok, lookup), ok)
	}

	for _, c := range []struct{ url, reason string }{
		{"ftp://good.example/x", `its scheme is "ftp"`},
		{"good.example/hook", `its scheme is ""`},
		{"https://user:pass@good.example/hook", "user information"},
		{"https://token@good.example/hook", "user information"},
		{"http:///hook", "it has no host"},
		{"http://mixed.example/hook", "its host resolves to 10.96.0.10, which is in the cluster's range 10.96.0.0/12"},
		{"http://meta.example/", "its host resolves to 169.254.169.254, which is link-local"},
		{"http://empty.example/", "resolves to no address"},
		{"http://nowhere.example/", "its host does not resolve: no such host"},
		{"http://169.254.169.254/x", "169.254.169.254 is link-local (an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it)"},
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
		}
	}

	err := g.CheckURL(ctx, "http://169.254.169.254/x", lookup)
	require.EqualError(t, err, "the webhook address http://169.254.169.254/x is refused: 169.254.169.254 is link-local (an operator may allow it with --notify-allow-cidrs, unless --notify-deny-cidrs holds it)")

	// Credentials never reach the message.
	err = g.CheckURL(ctx, "https://user:s3cret@good.example/hook", lookup)
	assert.NotContains(t, err.Error(), "s3cret")

	// A literal address is not resolved.
	looked = nil
	require.NoError(t, g.CheckURL(ctx, "http://93.184.216.34/", lookup))
	assert.Empty(t, looked)

	allowing := &Guard{Allow: prefixes(t, "10.96.0.10/32"), Deny: g.Deny}
	require.Error(t, allowing.CheckURL(ctx, "http://mixed.example/hook", lookup), "an allowed range does not open the cluster's")
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

func TestSendAnswers(t *testing.T) {
	ctx := context.Background()
	client := loopbackGuard(t).Client(5 * time.Second)

	r := newReceiver(t, http.StatusInternalServerError, "database down"+strings.Repeat(".", 1000))
	err := (&Sender{Client: client}).Send(ctx, Target{URL: r.srv.URL, Secret: "x"}, notice)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "500")
	assert.Contains(t, err.Error(), "database down")
	assert.Less(t, len(err.Error()), 400)

	r = newReceiver(t, http.StatusFound, "")
	err = (&Sender{Client: client}).Send(ctx, Target{URL: r.srv.URL + "/hook", Secret: "x"}, notice)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "302")
	assert.Equal(t, int32(1), r.hits.Load())
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
