package k8s

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PatientDial connects once the address listens again, within its wait, and gives up after it.
func TestPatientDialWaitsForTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // refused from now on

	go func() {
		time.Sleep(300 * time.Millisecond)
		if l, err := net.Listen("tcp", addr); err == nil {
			defer l.Close()
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}
	}()
	start := time.Now()
	c, err := PatientDial(5*time.Second, 50*time.Millisecond)(context.Background(), "tcp", addr)
	require.NoError(t, err, "connected once the address listened again")
	c.Close()
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln2.Addr().String()
	require.NoError(t, ln2.Close())
	start = time.Now()
	_, err = PatientDial(200*time.Millisecond, 50*time.Millisecond)(context.Background(), "tcp", closed)
	require.Error(t, err, "refused past the wait")
	assert.Less(t, time.Since(start), 2*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = PatientDial(10*time.Second, 50*time.Millisecond)(ctx, "tcp", closed)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's context bounds the wait")
}
