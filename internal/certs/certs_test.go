package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writePair writes a self-signed pair for name and returns its certificate's DER bytes.
func writePair(t *testing.T, certFile, keyFile, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return der
}

func TestReloadsWhenTheFilesChange(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writePair(t, certFile, keyFile, "first")
	var failures []error
	r, err := New(certFile, keyFile, func(err error) { failures = append(failures, err) })
	require.NoError(t, err)
	clock := time.Now()
	r.now = func() time.Time { return clock }
	assert.Equal(t, first, r.Certificate().Certificate[0])

	second := writePair(t, certFile, keyFile, "second")
	assert.Equal(t, first, r.Certificate().Certificate[0], "files are looked at again at most once a second")
	clock = clock.Add(checkEvery)
	assert.Equal(t, second, r.Certificate().Certificate[0], "the renewed pair is served")

	// A half-written renewal keeps the pair in use and is reported once.
	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	for range 3 {
		clock = clock.Add(checkEvery)
		assert.Equal(t, second, r.Certificate().Certificate[0])
	}
	assert.Len(t, failures, 1)
	third := writePair(t, certFile, keyFile, "third")
	clock = clock.Add(checkEvery)
	assert.Equal(t, third, r.Certificate().Certificate[0])
}

func TestNeedsAWholePair(t *testing.T) {
	dir := t.TempDir()
	_, err := New(filepath.Join(dir, "tls.crt"), "", nil)
	require.ErrorContains(t, err, "both")
	_, err = New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	assert.ErrorContains(t, err, "tls.crt")
}
