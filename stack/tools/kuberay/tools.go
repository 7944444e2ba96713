//go:build tools

// Package tools pins the commands the local stack builds, so that go.sum stays complete.
package tools

import (
	_ "github.com/ray-project/kuberay/ray-operator"
)
