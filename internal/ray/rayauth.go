package ray

import (
	"errors"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AuthTokenKey is the key of a Ray cluster's token in its Secret (KubeRay v1.6,
// controllers/ray/utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY).
const AuthTokenKey = "auth_token"

// AuthHeader is the header KubeRay sends a Ray cluster's token in, and that Ray reads where a proxy
// keeps Authorization for itself (KubeRay v1.6 controllers/ray/utils/dashboardclient/dashboard_httpclient.go;
// Ray 2.52+ python/ray/_private/authentication/http_token_authentication.py).
const AuthHeader = "X-Ray-Authorization"

// ClusterAuth is how the dashboard of a Ray cluster takes its callers, from the cluster spec's authOptions
// (KubeRay v1.6, apis/ray/v1/raycluster_types.go AuthOptions).
type ClusterAuth struct {
	// Token: mode "token"; every request to the dashboard needs a bearer token. KubeRay turns it on only
	// for that exact mode (utils.IsAuthEnabled), as this does.
	Token bool
	// Kubernetes: enableK8sTokenAuth as well; Ray checks callers' Kubernetes tokens (TokenReview and
	// SubjectAccessReview) and there is no static token.
	Kubernetes bool
	// Secret names the Secret holding the static token (key AuthTokenKey), as KubeRay names the one it
	// reads for the cluster (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/util.go
	// GetRayDashboardClientFunc): authOptions.secretName, else the one KubeRay makes per cluster, named
	// after it. "" without a static token. Its name is the author's choice: whoever sends its token
	// checks that the Secret is the cluster's own (k8s.Objects.DashboardToken).
	Secret string
}

// ClusterAuthOf reads how the dashboard of the Ray cluster named cluster, made from o's cluster spec, takes
// its callers.
func (k *Kind) ClusterAuthOf(o *unstructured.Unstructured, cluster string) ClusterAuth {
	opts, _, _ := unstructured.NestedMap(o.Object, append(slices.Clone(k.ClusterSpecPath), "authOptions")...)
	if mode, _ := opts["mode"].(string); mode != "token" {
		return ClusterAuth{}
	}
	a := ClusterAuth{Token: true}
	if k8s, _ := opts["enableK8sTokenAuth"].(bool); k8s {
		a.Kubernetes = true
		return a
	}
	if name, _ := opts["secretName"].(string); name != "" {
		a.Secret = name
	} else if cluster != "" {
		a.Secret = clippedName(cluster)
	}
	return a
}

// clippedName is a name as KubeRay fits what it derives from a cluster's name: its last 50 bytes, with
// a leading digit or punctuation replaced by "r" (controllers/ray/utils/util.go CheckName, v1.6).
func clippedName(s string) string {
	const maxLength = 50
	if len(s) > maxLength {
		s = s[len(s)-maxLength:]
	}
	if c := rune(s[0]); unicode.IsDigit(c) || unicode.IsPunct(c) {
		s = "r" + s[1:]
	}
	return s
}

// ErrTokenRequired is what a Ray dashboard's 401 means to a request that carried no token: Ray's token
// authentication is on and the caller sent none. Ray answers so from 2.52 (ray-project/ray
// python/ray/_private/authentication/http_token_authentication.py token_auth_middleware: 401
// "Unauthorized: Missing authentication token" without a token, 403 "Forbidden: Invalid authentication
// token" with a wrong one; no WWW-Authenticate header), where RAY_AUTH_MODE=token; from Ray 2.61 every
// cluster runs so unless RAY_AUTH_MODE=disabled (Ray 2.61.0 release notes: "Token authentication on by
// default ... ray start --head requires one").
var ErrTokenRequired = errors.New("the Ray dashboard requires a token")

// TokenRequiredError is ErrTokenRequired for an object whose cluster spec has no token authOptions, so
// that the service has no token to send: what the user must change, at Field (the authOptions of the
// object's cluster spec, such as spec.rayClusterSpec.authOptions).
type TokenRequiredError struct {
	Field string
}

func (e *TokenRequiredError) Error() string {
	return "its Ray dashboard requires a token (Ray's token authentication, on by default from Ray 2.61), and " +
		e.Field + " does not set mode: token, so the service has no token to send: set " + e.Field +
		".mode: token, for which KubeRay (v1.6 and later, Ray 2.52 and later) makes the token Secret the service " +
		"reads and gives the token to the Ray containers, or set RAY_AUTH_MODE=disabled in the Ray containers' " +
		"environment to turn Ray's authentication off"
}

func (e *TokenRequiredError) Unwrap() error { return ErrTokenRequired }

// TokenRequired is the error of a dashboard of o's cluster that requires a token where o's spec gives
// none (ErrTokenRequired, explained); nil where the spec sets token mode: KubeRay's Secret or the
// dashboard's own answer then says the rest.
func (k *Kind) TokenRequired(o *unstructured.Unstructured) error {
	if k.ClusterAuthOf(o, "").Token {
		return nil
	}
	return &TokenRequiredError{Field: strings.Join(k.ClusterSpecPath, ".") + ".authOptions"}
}
