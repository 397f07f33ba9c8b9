//go:build !linux

package proxy

import (
	"errors"

	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// loops: the epoll relay exists on Linux only; elsewhere every socket takes
// the goroutine relay.
type loops struct{}

func (*loops) start(*Proxy) error { return errors.New("epoll relay: Linux only") }
func (*loops) stop()              {}
func (*loops) running() bool      { return false }
func (*loops) uringRunning() bool { return false }

func (*loops) add(*socket, *upstream, []byte, *tls13.Takeover) bool { return false }
