// Package relay holds what every media relay shares and that needs no
// socket: the closing state machine of one relayed socket (closing.go),
// which decides who ended it, with which close code, what edge still owes
// each side, when the close handshake is over, and whether the pod is to
// blame. The relays (the goroutine pump and the epoll and io_uring loops in
// package proxy) feed it their close events and do the I/O it asks for;
// it reads no clock and touches no connection.
package relay
