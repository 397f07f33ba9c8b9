// Package relay holds what every media relay shares, and the seams
// between the relays and the proxy that hands them sockets:
//
//   - the relayed socket (socket.go): the client's and the pod's
//     connections, its start, its stop state, and its closing state
//     machine (closing.go), which decides who ended it, with which close
//     code, what edge still owes each side, when the close handshake is
//     over, and whether the pod is to blame; it reads no clock and
//     touches no connection, the relays feed it their close events and do
//     the I/O it asks for;
//   - the per-message policy (policy.go): frame accounting, the message
//     size limit, the client's framing and idle deadline, edge's close
//     frame, the byte and message counters; concrete types, called per
//     read with no interface in between;
//   - the host's seam (host.go): Host, which the proxy implements, told
//     once per socket when it is over (Ended), when its pod died mid-call
//     (PodLost) and, for a socket that may move, asked for another pod
//     (Resume); Env, what a relay is given at construction (the host, its
//     limits, the counters, the logger);
//   - read(2) and write(2) without the runtime's bookkeeping
//     (rawio_linux.go), which every relay uses on its non-blocking fds.
//
// The relays themselves live below: the goroutine pump in relay/pump, the
// epoll and io_uring loops in relay/loop; relay/relaytest is the kit each
// is tested with (a recording host, a socket over loopback TCP, scripted
// peers, and the scenarios every relay must pass).
package relay
