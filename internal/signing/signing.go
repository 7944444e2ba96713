// Package signing signs what the service writes where others may write too, and tells it from what
// they wrote: the creator recorded on a Ray object, the templates (ConfigMaps holding a manifest) and
// the namespaces' idle policies. One key signs them all (every replica the same, from internal/keys);
// each signature starts with a name and version of its own ("ray-template/v1", "ray-creator/v2",
// "ray-creator-at/v1", "ray-idle-policy/v2") and length-prefixes each part it covers, so that no
// signature of one thing stands for another. A change of what a signature covers takes a new version:
// those already written must keep verifying.
//
// It imports what it signs (package ray's kinds and templates), never the other way round: ray says
// what an object holds, and a summary's CreatorSigned is a plain field that the callers fill in here.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	"ray-service/internal/keys"
)

// MinKeyBytes is the shortest key a Signer takes.
const MinKeyBytes = keys.MinLength

// Signer signs with a key only the service holds. A nil Signer signs nothing and trusts nothing.
type Signer struct{ key []byte }

// New returns a signer with the given key, at least MinKeyBytes long.
func New(key []byte) (*Signer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("the template signing key has %d bytes: want at least %d", len(key), MinKeyBytes)
	}
	return &Signer{key: key}, nil
}

// mac is the signature of the parts, each length-prefixed; the first names what is signed.
func (s *Signer) mac(parts ...string) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range parts {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// equal compares signatures in constant time.
func equal(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }
