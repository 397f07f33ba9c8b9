package loop

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

// Options are what the host gives the loops at Start.
type Options struct {
	relay.Env
	// Uring asks for the io_uring loops (proxy.relay: uring), with a
	// batch window of at most UringBatch.
	Uring      bool
	UringBatch time.Duration
	// Carried counts a socket a loop takes, by loop (uring or epoll) and
	// client transport, before the loop can move a byte or end it, so
	// that whoever sees the socket's traffic or its end sees it counted.
	Carried func(uring, tls bool)
	// UringOwnBufs counts the receives that found a loop's buffer ring
	// empty and used a buffer of the socket's own.
	UringOwnBufs prometheus.Counter
}

// A close's stages on the loops' clock (package relay's bounds).
const (
	closeGrace = relay.CloseGrace
	lingerTime = relay.LingerTime
)

var noDeadline time.Time
