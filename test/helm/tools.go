//go:build tools

// Package tools pins the Helm client that the chart's tests run (test/k8s/helm.test.ts). It is never
// compiled: scripts/build-helm.sh builds the main package below from the version this module's go.mod
// and go.sum pin, and caches the binary.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm" // package main: helm
)
