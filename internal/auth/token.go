// Package auth identifies the caller by bearer token and asks Kubernetes what the caller may do.
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// Header names the token is read from, in order.
const (
	OpenFuyaoHeader = "X-OpenFuyao-Authorization"
	StandardHeader  = "Authorization"
)

// TokenFromRequest returns the caller's bearer token: from X-OpenFuyao-Authorization, else from
// Authorization. It returns "" when neither holds a bearer token.
func TokenFromRequest(r *http.Request) string {
	for _, h := range []string{OpenFuyaoHeader, StandardHeader} {
		if t := bearer(r.Header.Get(h)); t != "" {
			return t
		}
	}
	return ""
}

func bearer(v string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// TokenHash is how a token is named in caches and logs: never the token itself.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:12])
}
