package wsproto

import (
	"encoding/binary"
	"math"
)

// Scanner follows the WebSocket frame headers (RFC 6455 section 5.2) of
// one direction of a relayed stream without copying payloads: the relay
// forwards bytes as they come and the scanner only looks at them. It knows
// when the stream is at a frame boundary (where edge may inject a close
// frame), counts data messages, reads the status code of a close frame and
// spots a message larger than the limit, its fragments summed, and, from a
// client, a frame that breaks the protocol.
type Scanner struct {
	// Client: the stream is a client's, whose frames must be masked and
	// well formed (RFC 6455 5.1-5.5); Ext: the handshake negotiated an
	// extension, which may use the reserved bits. Set before the first
	// Scan.
	Client, Ext bool
	hdr         [14]byte
	hdrLen      int
	// remaining payload bytes of the current frame.
	remaining uint64
	// payloadOff is how far into the current payload we are (for unmasking
	// the close code).
	payloadOff uint64
	masked     bool
	mask       [4]byte
	isClose    bool
	closeBuf   [2]byte
	closeLen   int

	// msgLen is the payload of the data message in flight so far, its
	// frames summed (saturating); inMsg: its last frame has not come.
	msgLen uint64
	inMsg  bool

	// Messages counts complete data messages (frames with FIN whose opcode
	// is text, binary or continuation).
	Messages int64
	// CloseCode is the status code of the first close frame seen (0: none
	// yet; 1005 for a close frame without a code).
	CloseCode int
	// Refused is the close code of the first frame refused (0: none):
	// CloseTooBig for a frame that takes its message (or, a control frame,
	// itself) over the limit, CloseProtocolError for a client's frame that
	// breaks the protocol. Nothing is refused after it.
	Refused int
	// RefusedAt is, in the scan call that set Refused, the offset of that
	// frame's first header byte: the bytes before it are whole frames, so
	// a relay that forwards only them leaves its destination between
	// frames, where a close frame may follow (a close to the peer, not a
	// torn frame). -1 when the header began in an earlier call's bytes,
	// which were forwarded already.
	RefusedAt int
	// DropPongs: a pod's stream, in which the pod's answers to edge's
	// pings (PingPayload) are found; Pongs are their offsets in the last
	// Scan's bytes, each PongLen long. A pong split across two Scans is
	// not found (it passes to the client: an unsolicited pong, which RFC
	// 6455 5.5.3 lets a peer send and asks no answer to).
	DropPongs bool
	Pongs     []int
}

// AtBoundary reports whether every byte scanned so far ends a whole frame.
func (s *Scanner) AtBoundary() bool { return s.hdrLen == 0 && s.remaining == 0 }

// BetweenMessages reports whether every byte scanned so far ends a whole
// data message: at a frame boundary, with no fragmented message open. Only
// there may another stream's messages follow (a new pod's, after a call
// moved): a frame of a new message inside an open one breaks the protocol.
func (s *Scanner) BetweenMessages() bool { return s.AtBoundary() && !s.inMsg }

// UntilBoundary is how many of b, the stream's next bytes, end the frame
// in flight: 0 at a boundary, len(b) when all of b is inside the frame. A
// closing socket forwards them, so that its close frame can follow
// instead of a torn frame. s is not changed.
func (s *Scanner) UntilBoundary(b []byte) int {
	switch {
	case s.AtBoundary():
		return 0
	case s.hdrLen == 0 && s.remaining <= uint64(len(b)):
		return int(s.remaining)
	case s.hdrLen == 0:
		return len(b)
	}
	// A header split across reads: follow a copy byte by byte (rare, and
	// only on a closing socket).
	c := *s
	for i := range b {
		c.Scan(b[i:i+1], 0)
		if c.AtBoundary() {
			return i + 1
		}
	}
	return len(b)
}

// Scan follows p, the next bytes of the stream. limit bounds a message's
// payload, its frames summed, and a control frame's (0: no limit).
func (s *Scanner) Scan(p []byte, limit uint64) {
	total, hdrStart := len(p), -1
	s.Pongs = s.Pongs[:0]
	for len(p) > 0 {
		if s.DropPongs && s.hdrLen == 0 && s.remaining == 0 && isPong(p) {
			// A control frame: it changes no message state.
			s.Pongs = append(s.Pongs, total-len(p))
			p = p[PongLen:]
			continue
		}
		if s.remaining > 0 {
			n := uint64(len(p))
			if n > s.remaining {
				n = s.remaining
			}
			if s.isClose && s.closeLen < 2 {
				s.captureClose(p[:n])
			}
			s.remaining -= n
			s.payloadOff += n
			p = p[n:]
			if s.remaining == 0 {
				s.endFrame()
			}
			continue
		}
		// Accumulate the header: 2 bytes, then the extended length and the
		// mask key they announce.
		if s.hdrLen == 0 {
			hdrStart = total - len(p)
		}
		s.hdr[s.hdrLen] = p[0]
		s.hdrLen++
		p = p[1:]
		if s.hdrLen < 2 || s.hdrLen < headerLen(s.hdr[1]) {
			continue
		}
		if s.startFrame(limit) {
			s.RefusedAt = hdrStart
		}
	}
}

// headerLen is the full header length given the second header byte.
func headerLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// startFrame reads a complete header; it reports whether this frame is the
// first one refused.
func (s *Scanner) startFrame(limit uint64) (refused bool) {
	b0, b1 := s.hdr[0], s.hdr[1]
	length := uint64(b1 & 0x7f)
	off := 2
	switch length {
	case 126:
		length = uint64(binary.BigEndian.Uint16(s.hdr[2:4]))
		off = 4
	case 127:
		length = binary.BigEndian.Uint64(s.hdr[2:10])
		off = 10
	}
	s.masked = b1&0x80 != 0
	if s.masked {
		copy(s.mask[:], s.hdr[off:off+4])
	}
	fin, opcode := b0&0x80 != 0, b0&0x0f
	control := opcode >= 0x8
	s.isClose = opcode == 0x8
	s.closeLen = 0
	// What a server must fail a client's connection for (RFC 6455 5.1,
	// 5.2, 5.4, 5.5): edge refuses it before the pod sees it, so that no
	// client can make a strict pod drop its connection, which would read
	// as the pod's death.
	if s.Client && s.Refused == 0 {
		switch {
		case !s.masked, b0&0x70 != 0 && !s.Ext, opcode > 0x2 && opcode < 0x8, opcode > 0xa,
			control && (!fin || length > 125),
			opcode == 0x0 && !s.inMsg, opcode != 0x0 && !control && s.inMsg:
			s.Refused, refused = CloseProtocolError, true
		}
	}
	size := length
	if !control {
		if opcode != 0x0 {
			s.msgLen = 0
		}
		if sum := s.msgLen + length; sum >= length {
			s.msgLen = sum
		} else {
			s.msgLen = math.MaxUint64
		}
		s.inMsg = !fin
		size = s.msgLen
		if fin && opcode <= 0x2 {
			s.Messages++
		}
	}
	if limit > 0 && size > limit && s.Refused == 0 {
		s.Refused, refused = CloseTooBig, true
	}
	s.hdrLen = 0
	s.remaining = length
	s.payloadOff = 0
	if length == 0 {
		s.endFrame()
	}
	return refused
}

func (s *Scanner) captureClose(p []byte) {
	for i := 0; i < len(p) && s.closeLen < 2; i++ {
		b := p[i]
		if s.masked {
			b ^= s.mask[(s.payloadOff+uint64(i))%4]
		}
		s.closeBuf[s.closeLen] = b
		s.closeLen++
	}
}

func (s *Scanner) endFrame() {
	if s.isClose && s.CloseCode == 0 {
		s.CloseCode = CloseNoStatus // no status code present (RFC 6455 7.1.5)
		if s.closeLen == 2 {
			s.CloseCode = int(binary.BigEndian.Uint16(s.closeBuf[:]))
		}
	}
	s.isClose = false
}

// CloseFrame builds a close frame with code and a reason cut to fit a
// control frame; mask, when set, masks it (a client's frame, RFC 6455 5.3).
func CloseFrame(code int, reason string, mask *[4]byte) []byte {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	payload := make([]byte, 2+len(reason))
	binary.BigEndian.PutUint16(payload, uint16(code))
	copy(payload[2:], reason)
	f := []byte{0x88, byte(len(payload))}
	if mask != nil {
		f[1] |= 0x80
		f = append(f, mask[:]...)
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return append(f, payload...)
}

// Frame builds one frame of opcode with payload, masked with mask when it
// is set.
func Frame(fin bool, opcode byte, payload []byte, mask *[4]byte) []byte {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	var m byte
	if mask != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, m|byte(n))
	case n <= 0xffff:
		out = append(out, m|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, m|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	start := len(out)
	if mask != nil {
		out = append(out, mask[:]...)
		start += 4
	}
	out = append(out, payload...)
	if mask != nil {
		for i := range out[start:] {
			out[start+i] ^= mask[i%4]
		}
	}
	return out
}
