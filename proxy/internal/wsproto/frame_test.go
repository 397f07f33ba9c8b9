package wsproto

import (
	"bytes"
	"encoding/binary"
	"testing"
)

var frame = Frame

func TestFrameScanner(t *testing.T) {
	mask := &[4]byte{0xde, 0xad, 0xbe, 0xef}
	closeBody := binary.BigEndian.AppendUint16(nil, 4100)
	cases := map[string]struct {
		stream    []byte
		messages  int64
		closeCode int
		refused   int
	}{
		"text, binary, ping": {bytes.Join([][]byte{
			frame(true, 1, []byte(`{"event":"media"}`), nil),
			frame(true, 2, bytes.Repeat([]byte{1}, 300), nil),
			frame(true, 9, nil, nil),
		}, nil), 2, 0, 0},
		"masked, 64-bit length, over limit": {frame(true, 1, bytes.Repeat([]byte("a"), 70000), mask), 1, 0, CloseTooBig},
		"fragmented message":                {append(frame(false, 1, []byte("ab"), mask), frame(true, 0, []byte("cd"), mask)...), 1, 0, 0},
		"masked close with code":            {append(frame(true, 1, []byte("x"), mask), frame(true, 8, append(closeBody, "bye"...), mask)...), 1, 4100, 0},
		"close without code":                {frame(true, 8, nil, nil), 0, 1005, 0},
		"unmasked 64-bit length":            {frame(true, 2, make([]byte, 1<<16+1), nil), 1, 0, CloseTooBig},
		// Fragments each within the limit, a message over it: the
		// fragments are summed, control frames between them are not.
		"fragments over the limit": {bytes.Join([][]byte{
			frame(false, 2, make([]byte, 40000), nil),
			frame(true, 9, []byte("ping"), nil),
			frame(true, 0, make([]byte, 30000), nil),
		}, nil), 1, 0, CloseTooBig},
		"fragments within the limit": {bytes.Join([][]byte{
			frame(false, 2, make([]byte, 30000), nil),
			frame(false, 0, make([]byte, 30000), nil),
			frame(true, 0, make([]byte, 5536), nil),
			frame(true, 2, make([]byte, 60000), nil),
		}, nil), 2, 0, 0},
	}
	for name, tc := range cases {
		// Every chunking of the stream must read the same: reads split
		// frames anywhere.
		for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 20} {
			var s Scanner
			for p := tc.stream; len(p) > 0; {
				n := min(chunk, len(p))
				s.Scan(p[:n], 65536)
				p = p[n:]
			}
			if s.Messages != tc.messages || s.CloseCode != tc.closeCode || s.Refused != tc.refused || !s.AtBoundary() {
				t.Errorf("%s in chunks of %d: messages %d close %d refused %d boundary %v; want %d %d %d true",
					name, chunk, s.Messages, s.CloseCode, s.Refused, s.AtBoundary(), tc.messages, tc.closeCode, tc.refused)
			}
		}
	}
	var s Scanner
	s.Scan(frame(true, 1, []byte("hello"), nil)[:3], 0)
	if s.AtBoundary() {
		t.Error("mid-frame reads as a boundary")
	}
}

// A client's frames must be masked and well formed (RFC 6455 5.1-5.5):
// the first that is not is refused with 1002 at its header, whatever
// came before; a pod's are not checked.
func TestFrameScannerClientProtocol(t *testing.T) {
	mask := &[4]byte{1, 2, 3, 4}
	good := frame(true, 1, []byte("fine"), mask)
	withRSV := func(f []byte, bits byte) []byte { f = append([]byte(nil), f...); f[0] |= bits; return f }
	for name, tc := range map[string]struct {
		bad []byte
		ext bool // an extension negotiated
	}{
		"unmasked":                 {bad: frame(true, 1, []byte("x"), nil)},
		"reserved opcode":          {bad: frame(true, 3, []byte("x"), mask)},
		"reserved control opcode":  {bad: frame(true, 0xb, nil, mask)},
		"reserved bit":             {bad: withRSV(frame(true, 1, []byte("x"), mask), 0x40)},
		"fragmented ping":          {bad: frame(false, 9, nil, mask)},
		"long ping":                {bad: frame(true, 9, make([]byte, 126), mask)},
		"continuation first":       {bad: frame(true, 0, []byte("x"), mask)},
		"message inside a message": {bad: append(frame(false, 1, []byte("a"), mask), frame(true, 2, []byte("b"), mask)...)},
		"HTTP again":               {bad: []byte("GET / HTTP/1.1\r\n\r\n")},
	} {
		for _, chunk := range []int{1, 3, 1 << 20} {
			s := Scanner{Client: true, Ext: tc.ext}
			stream := append(append([]byte(nil), good...), tc.bad...)
			for p := stream; len(p) > 0; {
				n := min(chunk, len(p))
				s.Scan(p[:n], 1<<20)
				p = p[n:]
			}
			if s.Refused != CloseProtocolError {
				t.Errorf("%s in chunks of %d: refused %d, want %d", name, chunk, s.Refused, CloseProtocolError)
			}
			var pod Scanner
			pod.Scan(append(frame(false, 1, []byte("a"), nil), frame(true, 0, []byte("b"), nil)...), 1<<20)
			if pod.Refused != 0 {
				t.Errorf("a pod's fragmented message refused with %d", pod.Refused)
			}
		}
	}
	// permessage-deflate marks a message's first frame with RSV1.
	s := Scanner{Client: true, Ext: true}
	s.Scan(withRSV(good, 0x40), 1<<20)
	if s.Refused != 0 {
		t.Errorf("RSV1 with an extension negotiated refused with %d", s.Refused)
	}
}

func TestCloseFrameRoundTrip(t *testing.T) {
	mask := &[4]byte{1, 2, 3, 4}
	for _, m := range []*[4]byte{nil, mask} {
		var s Scanner
		s.Scan(CloseFrame(1001, "going away", m), 0)
		if s.CloseCode != 1001 || !s.AtBoundary() {
			t.Errorf("mask %v: scanned close %d boundary %v", m != nil, s.CloseCode, s.AtBoundary())
		}
	}
}
