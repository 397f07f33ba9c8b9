// Command kube-controller-manager is a thin wrapper that builds the upstream kube-controller-manager from the
// Go module proxy, at the same k8s.io/kubernetes version as
// test/kube-e2e/apiserver (test/node-e2e checks the two go.mod files agree).
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
