package k8s

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// ErrConnectionLost is in the chain of an error whose answer from the apiserver broke off after it had
// begun: the apiserver went away (restarted, killed, its connection closed) between the status line and
// the end of the body. client-go reports such a read as a plain formatted error whose cause it wraps;
// the cause is whatever the transport said (io.ErrUnexpectedEOF, an HTTP/2 stream or connection error,
// a reset). Marking it here lets one rule map it to a transient 503, as a refused connection is, rather
// than to an internal error. A write's outcome is then unknown: it may have been stored.
var ErrConnectionLost = errors.New("the connection to the Kubernetes API was lost before its answer was read")

type lostError struct{ cause error }

func (e lostError) Error() string   { return e.cause.Error() }
func (e lostError) Unwrap() []error { return []error{ErrConnectionLost, e.cause} }

// markLost wraps a transport so that a body that fails to read carries ErrConnectionLost. Watches are
// left as they are: client-go's watch decoder compares its read errors with io.EOF and
// io.ErrUnexpectedEOF by identity to tell a closed watch from a broken one.
type markLost struct{ next http.RoundTripper }

func (m markLost) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err != nil || resp.Body == nil || req.URL.Query().Get("watch") == "true" {
		return resp, err
	}
	resp.Body = lostBody{resp.Body}
	return resp, nil
}

type lostBody struct{ io.ReadCloser }

func (b lostBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = lostError{err}
	}
	return n, err
}
