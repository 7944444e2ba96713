package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/audit"
	"ray-service/internal/dashproxy"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// Envelope is the body of every JSON response: code is the HTTP status. Errors add reason and, for
// Invalid, the offending fields.
type Envelope struct {
	Code    int           `json:"code" example:"200"`
	Msg     string        `json:"msg" example:"OK"`
	Data    any           `json:"data"`
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
	var tokenRequired *ray.TokenRequiredError
	switch {
	case errors.As(err, &tokenRequired):
		// The object's spec and its Ray cluster disagree: the dashboard takes a token the spec gives the
		// service none for. The caller's credentials are fine (not 401) and the dashboard answered (not
		// 502): the remedy is a change of the object, as for the other conflicts with its state.
		env = Envelope{Code: http.StatusConflict, Msg: tokenRequired.Error(), Reason: string(metav1.StatusReasonConflict),
			Details: []FieldDetail{{Field: tokenRequired.Field + ".mode", Message: "set to token: the Ray cluster's dashboard requires a token"}}}
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
		if env.Code >= 500 && env.Code != http.StatusBadGateway && env.Code != http.StatusServiceUnavailable && env.Code != http.StatusGatewayTimeout {
			// The apiserver failed (its storage unavailable, most often): for the client a transient
			// 503, without the apiserver's detail, which is logged.
			return Envelope{Code: http.StatusServiceUnavailable, Msg: "the Kubernetes API could not serve the request",
				Reason: string(metav1.StatusReasonServiceUnavailable)}, true
		}
		if env.Reason == "" || env.Reason == string(metav1.StatusReasonUnknown) {
			env.Reason = reasonForCode(env.Code)
		}
	case errors.Is(err, audit.ErrOff):
		env = Envelope{Code: http.StatusServiceUnavailable, Msg: err.Error(), Reason: string(metav1.StatusReasonServiceUnavailable)}
	case errors.Is(err, context.DeadlineExceeded):
		env = Envelope{Code: http.StatusGatewayTimeout, Msg: "the Kubernetes API did not answer in time", Reason: string(metav1.StatusReasonTimeout)}
	case errors.Is(err, k8s.ErrConnectionLost):
		env = Envelope{Code: http.StatusServiceUnavailable, Reason: string(metav1.StatusReasonServiceUnavailable),
			Msg: "the connection to the Kubernetes API broke before its answer arrived; a change may or may not have been made"}
	case unreachable(err):
		env = Envelope{Code: http.StatusServiceUnavailable, Msg: "the Kubernetes API is unreachable", Reason: string(metav1.StatusReasonServiceUnavailable)}
	default:
		env = Envelope{Code: http.StatusInternalServerError}
	}
	if env.Code >= 500 && env.Code != http.StatusBadGateway && env.Code != http.StatusServiceUnavailable && env.Code != http.StatusGatewayTimeout {
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

// reasonCodes pairs the Kubernetes-style reasons API.md names with their statuses: metav1's, and the
// proxy's BadGateway (a Ray dashboard did not answer), for which Kubernetes has none.
var reasonCodes = []struct {
	reason metav1.StatusReason
	code   int
}{
	{metav1.StatusReasonBadRequest, http.StatusBadRequest},
	{metav1.StatusReasonUnauthorized, http.StatusUnauthorized},
	{metav1.StatusReasonForbidden, http.StatusForbidden},
	{metav1.StatusReasonNotFound, http.StatusNotFound},
	{metav1.StatusReasonMethodNotAllowed, http.StatusMethodNotAllowed},
	{metav1.StatusReasonConflict, http.StatusConflict},
	{metav1.StatusReasonAlreadyExists, http.StatusConflict},
	{metav1.StatusReasonRequestEntityTooLarge, http.StatusRequestEntityTooLarge},
	{metav1.StatusReasonUnsupportedMediaType, http.StatusUnsupportedMediaType},
	{metav1.StatusReasonInvalid, http.StatusUnprocessableEntity},
	{metav1.StatusReasonTooManyRequests, http.StatusTooManyRequests},
	{dashproxy.ReasonBadGateway, http.StatusBadGateway},
	{metav1.StatusReasonServiceUnavailable, http.StatusServiceUnavailable},
	{metav1.StatusReasonTimeout, http.StatusGatewayTimeout},
}

func codeForReason(r metav1.StatusReason) int {
	for _, rc := range reasonCodes {
		if rc.reason == r {
			return rc.code
		}
	}
	return http.StatusInternalServerError
}

// reasonForCode is the first reason of the table with that status (Conflict before AlreadyExists).
func reasonForCode(code int) string {
	for _, rc := range reasonCodes {
		if rc.code == code {
			return string(rc.reason)
		}
	}
	return string(metav1.StatusReasonInternalError)
}

// Errors this service raises itself, as Kubernetes status errors so that errorEnvelope maps them too.

func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

func statusError(code int, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}}
}
