//go:build tools

// Package tools pins the commands the local stack builds, so that go.sum stays complete.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
