// Package loop is the event-loop relay: a few loops outside Go's
// netpoller, each serving many sockets, with no goroutine per socket.
//
// It owns the epoll loops (eloop_linux.go: the loop set, detaching a TCP
// connection from the netpoller, the loop's wait and tick; esock_linux.go:
// one socket's reads and writes with raw non-blocking system calls), the
// io_uring loops (uloop_linux.go: receives and sends batched across
// sockets through one ring per loop, with a ring of provided buffers),
// the TLS 1.3 records of clients whose TLS edge terminates, opened and
// sealed on the loops (esock_tls_linux.go, usock_tls_linux.go, with
// package tls13), the eventfd inbox through which other goroutines hand a
// loop its sockets and stops (inbox_linux.go), and the close decisions
// both kinds of loop share (loopclose.go).
//
// The host starts the loops with Options (relay.Env: the host, its limits,
// the counters, the logger; and the loops' own settings) and hands them
// sockets with Add; a socket's end goes to relay.Host.Ended, once.
// What is relayed, counted and refused is package relay's Policy, a
// concrete type called per read. Elsewhere than Linux there are no loops
// (eloop_other.go): every socket takes the goroutine relay.
package loop
