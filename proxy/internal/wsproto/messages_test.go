package wsproto

import (
	"bytes"
	"errors"
	"testing"
)

// FirstMessages reads what a relay kept of a stream's opening: masked or
// not, fragmented, with control frames between, followed by more than was
// asked for, or cut short.
func TestFirstMessages(t *testing.T) {
	mask := &[4]byte{1, 2, 3, 4}
	connected := frame(true, OpText, []byte(`{"event":"connected"}`), mask)
	start := bytes.Join([][]byte{
		frame(false, OpText, []byte(`{"event":`), mask),
		frame(true, 0x9, []byte("ping"), mask),
		frame(true, OpContinuation, []byte(`"start"}`), mask),
	}, nil)
	media := frame(true, OpText, bytes.Repeat([]byte("m"), 300), mask)
	stream := bytes.Join([][]byte{connected, start, media}, nil)

	got, err := FirstMessages(stream, 2)
	if err != nil || len(got) != 2 || string(got[0].Payload) != `{"event":"connected"}` || string(got[1].Payload) != `{"event":"start"}` ||
		got[0].Opcode != OpText || got[1].Opcode != OpText {
		t.Fatalf("FirstMessages = %q, %v", got, err)
	}
	if got, err := FirstMessages(frame(true, OpBinary, []byte{7, 8}, nil), 1); err != nil || got[0].Opcode != OpBinary || !bytes.Equal(got[0].Payload, []byte{7, 8}) {
		t.Errorf("unmasked binary = %v, %v", got, err)
	}
	for n := range len(connected) + len(start) {
		if _, err := FirstMessages(stream[:n], 2); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("the first %d bytes: %v, want ErrIncomplete", n, err)
		}
	}
	for name, b := range map[string][]byte{
		"continuation first":         frame(true, OpContinuation, []byte("x"), mask),
		"new message inside one":     append(frame(false, OpText, []byte("a"), mask), frame(true, OpText, []byte("b"), mask)...),
		"reserved opcode":            frame(true, 0x3, []byte("x"), mask),
		"length past the bytes held": frame(true, OpText, []byte("abc"), mask)[:4],
	} {
		if _, err := FirstMessages(b, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
