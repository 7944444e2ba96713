//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The service's own metrics are not on the API's address in the chart: the API answers 404 for
// /metrics, the metrics address serves them, and the chart names that port. Before, anyone who could
// reach the API read the service's figures without a token.
func TestMetricsApartFromTheAPI(t *testing.T) {
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	chart := filepath.Join(env.root, "charts", "ray-package")
	manifest := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", "ray")
	assert.Contains(t, manifest, `metrics-listen: ":9091"`, "the chart serves /metrics apart")
	assert.Contains(t, manifest, "name: metrics, containerPort: 9091")

	metricsAddr := freeAddr(t)
	svc := startInstance(t, "ray-service-metrics-apart.log", "--metrics-listen", metricsAddr)
	ctx := context.Background()
	status, body, err := svc.get(ctx, "/metrics")
	require.NoError(t, err)
	assert.Equal(t, 404, status, "the API's address serves no metrics: %s", body)
	status, body, err = httpGet(ctx, "http://"+metricsAddr+"/metrics")
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.Contains(t, string(body), "go_goroutines", "the metrics address serves the service's figures")
	assert.Contains(t, string(body), "ray_service_", "the service's own series too")
}

// selfSigned writes a self-signed serving pair for 127.0.0.1 and returns the certificate's DER bytes.
func selfSigned(t *testing.T, certFile, keyFile, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	// The first line of its body: a log that showed the key file would hold it.
	holdSecret("the serving key "+name, strings.SplitN(string(keyPEM), "\n", 3)[1])
	// Written as the kubelet updates a mounted Secret: whole files, each put in place at once.
	for file, data := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  keyPEM,
	} {
		require.NoError(t, os.WriteFile(file+".new", data, 0o600))
		require.NoError(t, os.Rename(file+".new", file))
	}
	return der
}

// servedCertificate is the leaf the server at addr presents.
func servedCertificate(t *testing.T, addr string) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // reads the leaf only
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// Given a certificate, the API speaks HTTPS only (a token never crosses the network in the clear), and a
// renewed pair is served without a restart; the chart mounts a TLS Secret and probes over HTTPS.
func TestServesTLSAndReloads(t *testing.T) {
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	chart := filepath.Join(env.root, "charts", "ray-package")
	manifest := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", "ray", "--set", "ray-service.tls.existingSecret=ray-service-tls")
	assert.Contains(t, manifest, "tls-cert-file: /etc/ray-service-tls/tls.crt")
	assert.Contains(t, manifest, "secretName: ray-service-tls")
	assert.Equal(t, 2, strings.Count(manifest, "scheme: HTTPS"), "both probes")

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := selfSigned(t, certFile, keyFile, "first")
	svc := startInstance(t, "ray-service-tls.log",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile)
	addr := strings.TrimPrefix(svc.url, "https://")
	assert.Equal(t, first, servedCertificate(t, addr))

	// An authenticated call over HTTPS works; the same call in plain HTTP is refused before any token is read.
	req, err := http.NewRequest(http.MethodGet, svc.url+"/rest/ray/v1/rayclusters?pageSize=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+env.tokens["admin"])
	res, err := svc.client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)
	status, body, err := httpGet(context.Background(), "http://"+addr+"/healthz")
	require.NoError(t, err)
	assert.Equal(t, 400, status, "plain HTTP to the HTTPS port: %s", body)

	second := selfSigned(t, certFile, keyFile, "second")
	require.False(t, bytes.Equal(first, second))
	eventually(t, 10*time.Second, "the renewed certificate served", func() bool {
		return bytes.Equal(second, servedCertificate(t, addr))
	})
	// A broken renewal keeps the pair in use. The files are looked at again on a handshake, at most once a
	// second: handshakes go on until the service has read the broken file, as its log says, and each
	// presents the pair before.
	require.NoError(t, os.WriteFile(certFile, []byte("not a certificate"), 0o600))
	eventually(t, 30*time.Second, "the broken renewal read and refused", func() bool {
		require.Equal(t, second, servedCertificate(t, addr), "the pair before, while the broken one is read")
		return logMentioning(t, svc, "reading the renewed serving certificate") != ""
	})
	assert.Equal(t, second, servedCertificate(t, addr), "the pair before, once the broken one was refused")
}
