// Package kube holds thin wrapper mains (one directory each) that build the
// upstream kubelet, kube-controller-manager, kube-scheduler and kube-proxy
// from the Go module proxy for test/node-e2e. k8s.io/kubernetes cannot be
// `go install`ed directly because it replaces its staging modules with
// ./staging paths; go.mod replaces each with the published v0.x.y instead.
// It lives in its own module so edge's module graph does not grow.
package kube
