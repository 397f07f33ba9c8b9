//go:build !linux

package loop

import (
	"errors"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// Loops: the event loops exist on Linux only; elsewhere every socket
// takes the goroutine relay.
type Loops struct{}

func (*Loops) Start(Options) error { return errors.New("epoll relay: Linux only") }
func (*Loops) Stop()               {}
func (*Loops) Running() bool       { return false }
func (*Loops) UringRunning() bool  { return false }

func (*Loops) Add(*relay.Socket, []byte, []byte, *tls13.Takeover) bool { return false }
