// Package pump is the goroutine relay: two copy goroutines per socket on
// Go's netpoller (pump.go), reading into pooled buffers taken only once a
// socket is readable and writing with raw non-blocking system calls
// through syscall.RawConn, which keeps the runtime poller and the
// connections' deadlines (io.go).
//
// It is the relay where the event loops cannot be used: other systems, a
// TLS client whose records the loops cannot take over, another kind of
// client connection, or the loops not started. What is relayed, counted
// and refused is package relay's Policy; the socket's end goes to the
// host (relay.Host.Ended), once, after both connections are closed.
package pump
