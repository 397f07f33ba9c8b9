// Command coredns is a minimal CoreDNS for test/node-e2e's cluster DNS: the
// server (coremain) with only the plugins a cluster's DNS needs (kubernetes,
// forward, cache, errors, log, health, ready, loop, reload, loadbalance)
// instead of upstream's ~60. It lives in its own module so edge's module
// graph does not grow.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
