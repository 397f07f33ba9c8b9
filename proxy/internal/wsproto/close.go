package wsproto

// Close codes (RFC 6455 7.4.1 and the IANA registry) edge reads or sends.
const (
	CloseNormal    = 1000
	CloseGoingAway = 1001
	// CloseProtocolError: a frame that breaks RFC 6455 (unmasked from a
	// client, a reserved opcode or bit, a malformed control frame, a
	// fragment out of place).
	CloseProtocolError = 1002
	// CloseNoStatus is what a close frame without a code reads as; it is
	// never sent.
	CloseNoStatus   = 1005
	ClosePolicy     = 1008
	CloseTooBig     = 1009
	CloseBadGateway = 1014
)
