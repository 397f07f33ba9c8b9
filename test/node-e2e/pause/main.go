// Command pause is the pod sandbox's process for test/node-e2e's node (its
// containerd's sandbox_image, built here: no registry is reachable). It
// does what the upstream pause does: nothing until SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
