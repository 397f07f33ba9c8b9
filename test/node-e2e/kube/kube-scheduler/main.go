// Command kube-scheduler is a thin wrapper that builds the upstream kube-scheduler from the
// Go module proxy, at the same k8s.io/kubernetes version as
// test/kube-e2e/apiserver (test/node-e2e checks the two go.mod files agree).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
