package wsproto

import "crypto/rand"

// Edge's own pings to a pod (the relays' liveness check): a ping whose
// payload is PingPayload, which a pod answers with a pong of the same
// payload (RFC 6455 5.5.2, 5.5.3). Edge consumes those pongs (the
// provider never sees them): a scanner with DropPongs set reports where
// they are. A provider's own pings, and the pod's pongs to them, carry
// other payloads and pass.

// PingPayload is the payload of edge's pings.
const PingPayload = "edge"

// pongFrame is a pod's answer to edge's ping, as a server sends it
// (unmasked, RFC 6455 5.1).
var pongFrame = [...]byte{0x80 | opPong, byte(len(PingPayload)), 'e', 'd', 'g', 'e'}

const (
	opPing byte = 0x9
	opPong byte = 0xa
)

// PingFrame is edge's ping to a pod, masked afresh as a client's frames
// are (RFC 6455 5.3).
func PingFrame() []byte {
	var mask [4]byte
	rand.Read(mask[:])
	return Frame(true, opPing, []byte(PingPayload), &mask)
}

// isPong reports whether p starts with a pod's whole answer to edge's
// ping.
func isPong(p []byte) bool {
	return len(p) >= len(pongFrame) && [len(pongFrame)]byte(p[:len(pongFrame)]) == pongFrame
}

// PongLen is the length of a pod's answer to edge's ping.
const PongLen = len(pongFrame)
