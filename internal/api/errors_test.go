package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

func TestErrorEnvelope(t *testing.T) {
	gr := schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "ray.io", Kind: "RayCluster"}, "x",
		field.ErrorList{field.Required(field.NewPath("spec", "headGroupSpec"), "")})
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	cases := []struct {
		name     string
		err      error
		code     int
		reason   string
		internal bool
	}{
		{"not found", apierrors.NewNotFound(gr, "x"), 404, "NotFound", false},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), 409, "AlreadyExists", false},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("stale")), 409, "Conflict", false},
		{"invalid", invalid, 422, "Invalid", false},
		{"bad request", apierrors.NewBadRequest("bad"), 400, "BadRequest", false},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), 403, "Forbidden", false},
		{"unauthorized", apierrors.NewUnauthorized("who"), 401, "Unauthorized", false},
		{"too many", apierrors.NewTooManyRequests("slow down", 1), 429, "TooManyRequests", false},
		{"timeout", apierrors.NewTimeoutError("slow", 1), 504, "Timeout", false},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), 504, "Timeout", false},
		{"apiserver internal", apierrors.NewInternalError(errors.New("etcd secret detail")), 503, "ServiceUnavailable", true},
		{"unreachable", refused, 503, "ServiceUnavailable", false},
		{"wrapped unreachable", fmt.Errorf("listing: %w", refused), 503, "ServiceUnavailable", false},
		{"answer cut off", fmt.Errorf("unexpected error when reading response body: %w", k8s.ErrConnectionLost), 503, "ServiceUnavailable", false},
		{"deadline", context.DeadlineExceeded, 504, "Timeout", false},
		{"plain", errors.New("boom"), 500, "InternalError", true},
		{"Ray token required", fmt.Errorf("stopping: %w", &ray.TokenRequiredError{Field: "spec.rayClusterSpec.authOptions"}), 409, "Conflict", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, internal := errorEnvelope(c.err)
			assert.Equal(t, c.code, env.Code)
			assert.Equal(t, c.reason, env.Reason)
			assert.Equal(t, c.internal, internal)
			if internal {
				assert.NotContains(t, env.Msg, "detail", "no detail for the client")
			}
		})
	}
	env, _ := errorEnvelope(&ray.TokenRequiredError{Field: "spec.authOptions"})
	assert.Equal(t, []FieldDetail{{Field: "spec.authOptions.mode", Message: "set to token: the Ray cluster's dashboard requires a token"}}, env.Details)
	assert.Contains(t, env.Msg, "set spec.authOptions.mode: token")
	env, _ = errorEnvelope(invalid)
	assert.Equal(t, []FieldDetail{{Field: "spec.headGroupSpec", Message: "Required value"}}, env.Details)
}
