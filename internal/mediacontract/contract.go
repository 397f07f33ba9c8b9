// Package mediacontract is what the media proxy and the allocator agree on:
// a socket's lease and the two refusals of its admission. It is a leaf, so
// that the adapter edge runs (allocator.MediaLeases) can live beside the
// allocator, which the proxy's own tests import, instead of a copy of it in
// those tests.
package mediacontract

import "errors"

// Lease names a call, the pod it holds and the socket holding its media
// claim.
type Lease struct {
	CallID string
	Pod    string
	Holder string
}

// Outcomes the adapter wraps and the proxy branches on.
var (
	// ErrNoAllocation: the call holds no live allocation (released,
	// expired, or never allocated), or holds one on another pod.
	ErrNoAllocation = errors.New("no live allocation")
	// ErrClaimed: another media socket, on this replica or another, holds
	// the call.
	ErrClaimed = errors.New("the call already has a media socket")
)
