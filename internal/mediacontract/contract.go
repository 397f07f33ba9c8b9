// Package mediacontract is what the media proxy and the allocator agree on:
// a socket's lease, the refusals of its admission, and the pod health
// settings of connect-time failover. It is a leaf, so that the adapter edge
// runs (allocator.MediaLeases) can live beside the allocator, which the
// proxy's own tests import, instead of a copy of it in those tests.
package mediacontract

import (
	"errors"
	"time"
)

// Lease names a call, the pod it holds and the socket holding its media
// claim.
type Lease struct {
	CallID string
	Pod    string
	Holder string
}

// Renewal is what a renewal found of one socket's call.
type Renewal int8

const (
	// RenewalLost: the call lost its pod or the socket its claim (or the
	// provider said the call ended): the socket should close.
	RenewalLost Renewal = iota
	// RenewalHeld: the lease is renewed.
	RenewalHeld
	// RenewalPodGone: the call's pod left the registry and the call was
	// left to this socket, which moves it to another pod (it opted in to
	// moving: Leases.MarkResumable).
	RenewalPodGone
)

// Ejection is how pods whose dials fail are taken out of allocation on
// every replica: the probe backoff starts at Backoff and doubles with every
// consecutive failure up to MaxBackoff, and at most MaxPercent percent of
// a tier's pods are out at once.
type Ejection struct {
	Backoff, MaxBackoff time.Duration
	MaxPercent          int
}

// EjectedPod is a pod out of allocation and when its next probe is due.
type EjectedPod struct {
	Pod      string
	ProbeDue time.Time
}

// Outcomes the adapter wraps and the proxy branches on.
var (
	// ErrNoAllocation: the call holds no live allocation (released,
	// expired, or never allocated), or holds one on another pod.
	ErrNoAllocation = errors.New("no live allocation")
	// ErrClaimed: another media socket, on this replica or another, holds
	// the call.
	ErrClaimed = errors.New("the call already has a media socket")
	// ErrNoOtherPod: a call could not be moved, its chain has no other
	// pod.
	ErrNoOtherPod = errors.New("no other pod for the call")
)

// Claimed is an admitted socket's call: the pod it is on and what its
// call info says of it, for the socket's log lines.
type Claimed struct {
	Pod        string
	MerchantID string
	// Creator is who created the call ("provider:twilio", "token:<name>").
	Creator string
	// TraceParent is the W3C trace context of the webhook that allocated
	// the call ("" when none was kept: tracing off).
	TraceParent string
	// MovedFrom lists the pods the call left after failed connects, in
	// order (connect-time failovers before this socket).
	MovedFrom []string
	// FailedHandshakes counts the call's earlier sockets that reached no
	// pod and left the call to the provider's retry of the handshake
	// (Unclaim with failed set).
	FailedHandshakes int
	// SourcePool is where the call's pod came from: "pool:<tier>" or
	// "merchant:<id>" (a merchant's dedicated pool).
	SourcePool string
}

// SocketEnd is what a media socket's end tells its call's release, for the
// call's record (its timeline): how the socket ended and what it carried.
type SocketEnd struct {
	// Ended is why the call was released: socket_close (a side closed),
	// drain (edge shutting down), lease_lost or pod_lost.
	Ended string
	// ClosedBy is who closed first (client, pod, edge) and CloseCode the
	// code ("none": the TCP connection ended without a close frame).
	ClosedBy, CloseCode string
	// Reason is the close frame's reason edge sent (its own close:
	// "pod lost: hung, no_pod", "call moved", ...); "" when the socket's
	// close was a peer's.
	Reason string
	Closed time.Time
	// In is client to pod, Out pod to client.
	MessagesIn, MessagesOut, BytesIn, BytesOut int64
}
