package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Envelope is the body of every JSON response: code is the HTTP status. Errors add reason and, for
// Invalid, the offending fields.
type Envelope struct {
	Code    int           `json:"code" example:"200"`
	Msg     string        `json:"msg" example:"OK"`
	Data    interface{}   `json:"data"`
	Reason  string        `json:"reason,omitempty" example:"NotFound"`
	Details []FieldDetail `json:"details,omitempty"`
}

// FieldDetail names one invalid field.
type FieldDetail struct {
	Field   string `json:"field" example:"spec.headGroupSpec"`
	Message string `json:"message" example:"Required value"`
}

// errorEnvelope maps any error — from the Kubernetes API, from the network, or from this service's own
// checks, which are built as Kubernetes status errors — to the status and body API.md promises. It is the
// only place that chooses an error's status. internal reports whether the detail must stay in the log.
func errorEnvelope(err error) (env Envelope, internal bool) {
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		s := status.Status()
		env = Envelope{Code: int(s.Code), Msg: s.Message, Reason: string(s.Reason)}
		if env.Code == 0 {
			env.Code = codeForReason(s.Reason)
		}
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				env.Details = append(env.Details, FieldDetail{Field: c.Field, Message: c.Message})
			}
		}
		switch s.Reason {
		case metav1.StatusReasonInvalid:
			env.Code = http.StatusUnprocessableEntity
		case metav1.StatusReasonTimeout, metav1.StatusReasonServerTimeout:
			env.Code, env.Reason = http.StatusGatewayTimeout, string(metav1.StatusReasonTimeout)
		}
		if env.Reason == "" || env.Reason == string(metav1.StatusReasonUnknown) {
			env.Reason = reasonForCode(env.Code)
		}
	case errors.Is(err, context.DeadlineExceeded):
		env = Envelope{Code: http.StatusGatewayTimeout, Msg: "the Kubernetes API did not answer in time", Reason: string(metav1.StatusReasonTimeout)}
	case unreachable(err):
		env = Envelope{Code: http.StatusServiceUnavailable, Msg: "the Kubernetes API is unreachable", Reason: string(metav1.StatusReasonServiceUnavailable)}
	default:
		env = Envelope{Code: http.StatusInternalServerError}
	}
	if env.Code >= 500 && env.Code != http.StatusServiceUnavailable && env.Code != http.StatusGatewayTimeout {
		env.Code, env.Msg, env.Reason, env.Details = http.StatusInternalServerError, "internal error", string(metav1.StatusReasonInternalError), nil
		return env, true
	}
	if env.Msg == "" {
		env.Msg = http.StatusText(env.Code)
	}
	return env, false
}

func unreachable(err error) bool {
	var opErr *net.OpError
	var urlErr *url.Error
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED) ||
		(errors.As(err, &urlErr) && !errors.Is(err, context.Canceled))
}

func codeForReason(r metav1.StatusReason) int {
	switch r {
	case metav1.StatusReasonNotFound:
		return http.StatusNotFound
	case metav1.StatusReasonAlreadyExists, metav1.StatusReasonConflict:
		return http.StatusConflict
	case metav1.StatusReasonInvalid:
		return http.StatusUnprocessableEntity
	case metav1.StatusReasonBadRequest:
		return http.StatusBadRequest
	case metav1.StatusReasonForbidden:
		return http.StatusForbidden
	case metav1.StatusReasonUnauthorized:
		return http.StatusUnauthorized
	case metav1.StatusReasonTooManyRequests:
		return http.StatusTooManyRequests
	case metav1.StatusReasonRequestEntityTooLarge:
		return http.StatusRequestEntityTooLarge
	case metav1.StatusReasonUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case metav1.StatusReasonServiceUnavailable:
		return http.StatusServiceUnavailable
	case metav1.StatusReasonTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func reasonForCode(code int) string {
	switch code {
	case http.StatusBadRequest:
		return string(metav1.StatusReasonBadRequest)
	case http.StatusUnauthorized:
		return string(metav1.StatusReasonUnauthorized)
	case http.StatusForbidden:
		return string(metav1.StatusReasonForbidden)
	case http.StatusNotFound:
		return string(metav1.StatusReasonNotFound)
	case http.StatusConflict:
		return string(metav1.StatusReasonConflict)
	case http.StatusRequestEntityTooLarge:
		return string(metav1.StatusReasonRequestEntityTooLarge)
	case http.StatusUnsupportedMediaType:
		return string(metav1.StatusReasonUnsupportedMediaType)
	case http.StatusUnprocessableEntity:
		return string(metav1.StatusReasonInvalid)
	case http.StatusTooManyRequests:
		return string(metav1.StatusReasonTooManyRequests)
	case http.StatusServiceUnavailable:
		return string(metav1.StatusReasonServiceUnavailable)
	case http.StatusGatewayTimeout:
		return string(metav1.StatusReasonTimeout)
	}
	return string(metav1.StatusReasonInternalError)
}

// Errors this service raises itself, as Kubernetes status errors so that errorEnvelope maps them too.

func badRequest(format string, args ...interface{}) error {
	return apierrors.NewBadRequest(sprintf(format, args...))
}

func statusError(code int, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}}
}
