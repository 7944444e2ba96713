//go:build tools

// Package tools pins the commands the local stack builds, so that go.sum stays complete.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
