package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
)

// TypePrefix makes a notice's short type a CloudEvents type: "job.succeeded" is sent as
// "com.openfuyao.ray.job.succeeded".
const TypePrefix = "com.openfuyao.ray."

// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the exact body with the subscription's
// secret.
const SignatureHeader = "X-Ray-Service-Signature"

// ContentType is that of a structured CloudEvent in JSON.
const ContentType = event.ApplicationCloudEventsJSON + "; charset=utf-8"

const (
	defaultSource    = "/ray-service"
	defaultUserAgent = "ray-service"
	// drained is how much of an answer is read to keep its connection for the next delivery.
	drained = 64 << 10
)

// Notice is something that happened to a Ray object, numbered in the order it happened.
type Notice struct {
	Seq                        int64
	Type                       string // short, like "job.succeeded"
	Kind, Namespace, Name, UID string
	Time                       time.Time
	// Labels are the object's, for the subscriptions' selectors (not sent).
	Labels map[string]string
	Data   map[string]any
}

// Event returns the notice as a CloudEvent 1.0 in structured JSON. Its id is the notice's number,
// unique together with source; its data holds the object's kind, namespace, name and uid, the short
// type and the time, next to the notice's Data (which cannot shadow them).
func Event(n Notice, source string) ([]byte, error) {
	if n.Type == "" {
		return nil, errors.New("the notice has no type")
	}
	e := event.New(event.CloudEventsVersionV1)
	e.SetSpecVersion(event.CloudEventsVersionV1)
	e.SetID(strconv.FormatInt(n.Seq, 10))
	e.SetSource(source)
	e.SetType(TypePrefix + n.Type)
	e.SetSubject(n.Kind + "/" + n.Name)
	e.SetTime(n.Time)

	data := make(map[string]any, len(n.Data)+6)
	maps.Copy(data, n.Data)
	data["kind"] = n.Kind
	data["namespace"] = n.Namespace
	data["name"] = n.Name
	data["uid"] = n.UID
	data["type"] = n.Type
	if !n.Time.IsZero() {
		data["time"] = n.Time.UTC().Format(time.RFC3339Nano)
	}
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		return nil, fmt.Errorf("the notice's data is not JSON: %w", err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("the notice makes no valid CloudEvent: %w", err)
	}
	return e.MarshalJSON()
}

// Target is a subscriber's webhook and the secret its deliveries are signed with.
type Target struct {
	URL, Secret string
}

// Sender delivers notices. Client should come from Guard.Client; nil means a guarded client with
// no allowed ranges. Source is the CloudEvents source ("/ray-service" if empty).
type Sender struct {
	Client    *http.Client
	Source    string
	UserAgent string
}

// Failure is a try that did not deliver. Its message is what the delivery log shows to whoever reads
// the subscription: the receiver's status alone, never its answer's body, and one same message for every
// try that got no answer (refused, reset, timed out, a TLS handshake that failed), so that the log is no
// port scanner. The cause, for the service's own log, is unwrapped.
type Failure struct {
	Shown string
	cause error
}

func (f *Failure) Error() string { return f.Shown }
func (f *Failure) Unwrap() error { return f.cause }

// Send delivers a notice to t. Any 2xx answer is a delivery; a redirect is not followed and, like any
// other answer, is an error. Errors are a *Failure; a refusal of the guard at dial time is a
// *RefusedError in its chain. A try that gets no answer returns no sooner than the client's time bound
// after it began: how long it took would tell a refused port from a silent one.
func (s *Sender) Send(ctx context.Context, t Target, n Notice) error {
	source := s.Source
	if source == "" {
		source = defaultSource
	}
	body, err := Event(n, source)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return &Failure{Shown: "the webhook address is not usable", cause: err}
	}
	ua := s.UserAgent
	if ua == "" {
		ua = defaultUserAgent
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set(SignatureHeader, Sign(t.Secret, body))
	req.Header.Set("User-Agent", ua)

	client := s.Client
	if client == nil {
		client = (&Guard{}).Client(10 * time.Second)
	}
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		// The client's error names the whole URL, whose path may be the webhook's secret: keep its cause.
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			err = uerr.Err
		}
		if refused, ok := errors.AsType[*RefusedError](err); ok {
			// The guard's own verdict, as the create told it: not the address dialed.
			return &Failure{Shown: fmt.Sprintf("the webhook %s was refused when dialed: its host's address %s%s",
				redacted(t.URL), refused.Refusal, allowHint), cause: err}
		}
		if client.Timeout > 0 {
			sleep(ctx, time.Until(began.Add(client.Timeout)))
		}
		return &Failure{Shown: fmt.Sprintf("the webhook %s gave no answer", redacted(t.URL)), cause: err}
	}
	defer resp.Body.Close()
	// Read only to keep the connection for the next delivery, and never kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drained))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	// The code alone: the reason phrase after it is the receiver's text, as its body is.
	msg := fmt.Sprintf("the webhook %s answered %d", redacted(t.URL), resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		msg += " " + text
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += " (redirects are not followed)"
	}
	return &Failure{Shown: msg, cause: errors.New(msg)}
}

// Redacted is a webhook's URL as it may be logged or recorded: its scheme and host.
func Redacted(raw string) string { return redacted(raw) }

// redacted is a URL as it may be logged.
func redacted(raw string) string {
	// A webhook's path and query often hold its own secret (a chat service's hook token): errors, which
	// are logged and shown in the delivery log, name the scheme and host alone.
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return "the subscription's address"
}

// Sign returns the value of SignatureHeader for body.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify tells whether header is the signature of body with secret, in constant time: what a
// subscriber checks before trusting a delivery.
func Verify(secret string, body []byte, header string) bool {
	sig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// NewSecret returns a new subscription secret: 32 random bytes, base64url without padding.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
