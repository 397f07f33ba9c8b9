package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// frame builds one WebSocket frame.
func frame(fin bool, opcode byte, payload []byte, mask *[4]byte) []byte {
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
	p := append([]byte(nil), payload...)
	if mask != nil {
		out = append(out, mask[:]...)
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return append(out, p...)
}

func TestFrameScanner(t *testing.T) {
	mask := &[4]byte{0xde, 0xad, 0xbe, 0xef}
	closeBody := binary.BigEndian.AppendUint16(nil, 4100)
	cases := map[string]struct {
		stream    []byte
		messages  int64
		closeCode int
		tooBig    bool
	}{
		"text, binary, ping": {bytes.Join([][]byte{
			frame(true, 1, []byte(`{"event":"media"}`), nil),
			frame(true, 2, bytes.Repeat([]byte{1}, 300), nil),
			frame(true, 9, nil, nil),
		}, nil), 2, 0, false},
		"masked, 64-bit length, over limit": {frame(true, 1, bytes.Repeat([]byte("a"), 70000), mask), 1, 0, true},
		"fragmented message":                {append(frame(false, 1, []byte("ab"), mask), frame(true, 0, []byte("cd"), mask)...), 1, 0, false},
		"masked close with code":            {append(frame(true, 1, []byte("x"), mask), frame(true, 8, append(closeBody, "bye"...), mask)...), 1, 4100, false},
		"close without code":                {frame(true, 8, nil, nil), 0, 1005, false},
		"unmasked 64-bit length":            {frame(true, 2, make([]byte, 1<<16+1), nil), 1, 0, true},
	}
	for name, tc := range cases {
		// Every chunking of the stream must read the same: reads split
		// frames anywhere.
		for _, chunk := range []int{1, 2, 3, 7, 64, 1 << 20} {
			var s frameScanner
			for p := tc.stream; len(p) > 0; {
				n := min(chunk, len(p))
				s.scan(p[:n], 65536)
				p = p[n:]
			}
			if s.Messages != tc.messages || s.CloseCode != tc.closeCode || s.TooBig != tc.tooBig || !s.atBoundary() {
				t.Errorf("%s in chunks of %d: messages %d close %d tooBig %v boundary %v; want %d %d %v true",
					name, chunk, s.Messages, s.CloseCode, s.TooBig, s.atBoundary(), tc.messages, tc.closeCode, tc.tooBig)
			}
		}
	}
	var s frameScanner
	s.scan(frame(true, 1, []byte("hello"), nil)[:3], 0)
	if s.atBoundary() {
		t.Error("mid-frame reads as a boundary")
	}
}

func TestCloseFrameRoundTrip(t *testing.T) {
	mask := &[4]byte{1, 2, 3, 4}
	for _, m := range []*[4]byte{nil, mask} {
		var s frameScanner
		s.scan(closeFrame(1001, "going away", m), 0)
		if s.CloseCode != 1001 || !s.atBoundary() {
			t.Errorf("mask %v: scanned close %d boundary %v", m != nil, s.CloseCode, s.atBoundary())
		}
	}
}

func TestCodeLabelIsBounded(t *testing.T) {
	for code, want := range map[int]string{
		1000: "1000", 1011: "1011", 4000: "4000", 4999: "4999",
		3001: "3xxx", 999: "invalid", 1016: "invalid", 2000: "invalid", 5000: "invalid", 65535: "invalid",
	} {
		if got := codeLabel(code); got != want {
			t.Errorf("codeLabel(%d) = %q, want %q", code, got, want)
		}
	}
}
