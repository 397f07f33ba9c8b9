// Command kube-apiserver is a thin wrapper that builds the upstream kube-apiserver
// from the Go module proxy. k8s.io/kubernetes cannot be `go install`ed directly
// because it replaces its staging modules with ./staging paths; this module
// replaces each of them with the published v0.x.y instead (see go.mod).
// It lives in its own module so edge's module graph does not grow.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
