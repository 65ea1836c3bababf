//go:build tools

// Package tools pins the Kubernetes API server and the etcd server that the tests start on
// loopback. It is never compiled: scripts/build-kube.sh builds the two main packages below from
// the versions this module's go.mod and go.sum pin, and caches the binaries.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"            // package main: etcd
	_ "k8s.io/kubernetes/cmd/kube-apiserver" // package main: kube-apiserver
)
