// Package proxy serves the media WebSockets at /ws/pod/<pod>/<token>/<rest>
// and relays them to the pod, with the call's lease tied to the socket.
//
// It owns: admission (the per-call token, checked in constant time before
// any Redis or network work, then one Redis read that the call still holds
// the pod), the upstream WebSocket handshake to an address learned only from
// the pod source, a byte relay that parses frame headers in passing (to
// count messages, see close codes, bound message size, refuse a client's
// broken framing and inject close frames at a frame boundary), chosen at
// Run and handed each socket: a few epoll or io_uring event loops outside
// Go's netpoller (internal/relay/loop), which also open and seal the TLS
// 1.3 records of clients whose TLS edge terminates, or two goroutines per
// socket (internal/relay/pump) where the loops cannot be used; one batched
// lease renewal per interval for every socket of the replica,
// connect-time failover (failover.go), the move of a call whose pod dies
// mid-call to another pod, the provider kept (proxy.resume, resume.go;
// the relay stops both directions, the host allocates, dials and replays
// the stream's opening), the health probes of ejected pods, release of
// the call when its socket ends (socket.go: the socket, what its end
// owes, the relays' Host), and the drain of hijacked sockets on shutdown,
// which http.Server.Shutdown does not track.
//
// A call moves to another pod of its chain in two cases, both through one
// allocator script (allocator/lua/move_call.lua, fenced on the socket's
// media claim, the pods the call left never taken again): its pod cannot
// be reached when the socket opens (failover.go: nothing has reached the
// provider, which sees one handshake), or its pod dies while the call
// streams (resume.go: the relay stops both directions, the call moves,
// the new pod is dialled with ResumedHeader and given the stream's
// opening again, and the provider's socket never closes). What the
// provider is told of a mid-call move and which of its answers to the dead
// pod are dropped is aftermove.go; how many moves a merchant's calls may
// make on this replica is movebudget.go. The media URL the provider holds
// stays valid across both: admission (admit.go, Leases.Claim and
// allocator/lua/claim.lua) admits a pod in the call's moved_from.
//
// What has a protocol of its own lives beside it: the media URL and its
// token (mediaurl), RFC 6455 framing and handshakes (internal/wsproto),
// the TLS 1.3 record layer and its hand-off from crypto/tls
// (internal/tls13), the io_uring kernel interface (internal/iouring), what
// every relay shares (internal/relay: the relayed socket and its closing
// state machine, the per-message policy, the raw reads and writes, and
// the Host seam this package implements: relayHost in socket.go), and the
// relays themselves (internal/relay/pump, internal/relay/loop). No unsafe
// memory or raw system call is left here.
//
// It is a leaf: pod addresses, leases and releases come in through Deps
// (the Leases interface and the Lookup func), wired in cmd/edge. See
// docs/media.md.
package proxy
