// Package wsproto is RFC 6455 without sockets: the frame scanner that
// follows a relayed stream's frame headers (boundaries, messages, close
// codes, size limits and a client's framing), close frames and codes, the
// checks of a client's opening handshake, and the client side of a
// handshake on a connection the caller opened, with the caller's headers
// (the pod's upgrade and the health probe's). It reads and writes what it
// is given and owns no connection.
package wsproto
