// Package certs holds the service's serving certificate: a key pair read from two files and read again
// when they change, so that a renewed certificate (cert-manager writing its Secret, the kubelet updating
// the mounted files) is served without a restart.
package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// checkEvery is how often, at most, the files are looked at again.
const checkEvery = time.Second

// Reloader serves the key pair of CertFile and KeyFile, read again once either file's size or time of
// change differs from what was loaded. A pair that fails to load (a renewal seen half-written) leaves
// the one loaded before in use, and the failure is reported to OnError.
type Reloader struct {
	certFile, keyFile string
	onError           func(error)
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// New loads the pair once; it is an error when it cannot. onError (may be nil) hears of later failures.
func New(certFile, keyFile string, onError func(error)) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a serving certificate needs both a certificate file and a key file")
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, onError: onError, now: time.Now}
	st, err := stamps(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if r.cert, err = r.load(); err != nil {
		return nil, err
	}
	r.stamp, r.checked = st, r.now()
	return r, nil
}

func stamps(files ...string) ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{size: st.Size(), mod: st.ModTime()}
	}
	return out, nil
}

func (r *Reloader) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s with key %s: %w", r.certFile, r.keyFile, err)
	}
	return &cert, nil
}

// Certificate is the pair to serve now, read again if the files changed.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= checkEvery {
		r.checked = now
		// A pair that fails is tried again only once the files change again: a renewal written one
		// file at a time loads when its second file lands.
		if st, err := stamps(r.certFile, r.keyFile); err == nil && st != r.stamp {
			r.stamp = st
			cert, err := r.load()
			switch {
			case err == nil:
				r.cert = cert
			case r.onError != nil:
				r.onError(err)
			}
		}
	}
	return r.cert
}

// TLSConfig is a server configuration that serves the reloaded pair, TLS 1.2 or later.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.Certificate(), nil
		},
	}
}
