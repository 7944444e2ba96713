//go:build tools

// Package tools pins the commands the local stack builds, so that go.sum stays complete.
//
// The operator is the newest ray-operator release the Go module proxy serves whole: v1.6.2. The proxy
// knows v1.7.0 (its .info and .mod, tag ray-operator/v1.7.0) but refuses its .zip ("This module version
// is not available"), and does not know v1.7.1; what only v1.7 writes is played by the tests instead.
package tools

import (
	_ "github.com/ray-project/kuberay/ray-operator"
)
