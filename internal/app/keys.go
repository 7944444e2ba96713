package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"ray-service/internal/audit"
	"ray-service/internal/config"
	"ray-service/internal/keys"
)

// signingKey reads a key from its file, or from its Secret (made with a new key by the first replica
// to start).
func signingKey(file, secret string, core kubernetes.Interface) ([]byte, error) {
	if file != "" {
		return keys.FromFile(file)
	}
	ns, name, err := keys.ParseSecretRef(secret)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return keys.FromSecret(ctx, core.CoreV1().Secrets(ns), ns, name, keys.DataKey)
}

// readAuditKey reads the audit key, which must not be the template key: each signs what the other
// must not stand for.
func readAuditKey(cfg *config.Config, core kubernetes.Interface, templateKey []byte) (audit.Key, error) {
	b, err := signingKey(cfg.AuditKeyFile, cfg.AuditKeySecret, core)
	if err != nil {
		return nil, fmt.Errorf("the audit key: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(templateKey)) {
		return nil, errors.New("the audit key is the template key: give the audit trail a key of its own (audit-key-file or audit-key-secret)")
	}
	return audit.NewKey(b)
}
