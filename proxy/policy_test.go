package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// newTestPolicy is a policy of a socket started at clock 0, with its own
// unregistered counters.
func newTestPolicy(limit int64, idle time.Duration) (*policy, *socket) {
	var p policy
	p.init(&Config{MaxMessageBytes: limit, IdleTimeout: idle}, newMetrics(nil), 0, false)
	return &p, &socket{}
}

// Both relays hand the policy whatever their reads return: the same
// stream must account the same in any chunking.
func TestPolicyAccountsEachDirection(t *testing.T) {
	mask := &[4]byte{9, 8, 7, 6}
	closeBody := binary.BigEndian.AppendUint16(nil, 4100)
	toPod := bytes.Join([][]byte{
		frame(true, 1, []byte(`{"event":"media"}`), mask),
		frame(false, 2, bytes.Repeat([]byte{1}, 200), mask),
		frame(true, 0, bytes.Repeat([]byte{2}, 200), mask),
		frame(true, 9, nil, mask),
	}, nil)
	toClient := bytes.Join([][]byte{
		frame(true, 1, []byte("hello"), nil),
		frame(true, 8, append(closeBody, "bye"...), nil),
	}, nil)
	for _, chunk := range []int{1, 5, 64, 1 << 20} {
		p, s := newTestPolicy(1024, 0)
		for i, stream := range [][]byte{toClient, toPod} {
			d := &p.dirs[1-i]
			for b := stream; len(b) > 0; {
				n := min(chunk, len(b))
				if _, v := d.relayed(s, b[:n]); v.code != 0 {
					t.Fatalf("chunks of %d: verdict %+v within the limit", chunk, v)
				}
				b = b[n:]
			}
		}
		in, out := p.dirs[0].bytes, p.dirs[1].bytes
		if in != int64(len(toPod)) || out != int64(len(toClient)) {
			t.Errorf("chunks of %d: bytes %d/%d, want %d/%d", chunk, in, out, len(toPod), len(toClient))
		}
		for i, want := range []float64{2, 1} {
			c := p.dirs[i].counter
			if got := value(c.messages); got != want {
				t.Errorf("chunks of %d: dir %d messages %v, want %v", chunk, i, got, want)
			}
			if got := value(c.bytes); got != float64(p.dirs[i].bytes) {
				t.Errorf("chunks of %d: dir %d bytes counter %v, want %d", chunk, i, got, p.dirs[i].bytes)
			}
		}
		if initiator, code := closeOrigin(s.result()); initiator != "pod" || code != "4100" {
			t.Errorf("chunks of %d: close origin %s %s, want pod 4100", chunk, initiator, code)
		}
	}
}

// A frame over the limit ends the socket with 1009 as soon as its header
// is read, from either side (the client's masked), in a socket's early
// bytes as later.
func TestPolicyTooBig(t *testing.T) {
	for name, tc := range map[string]struct {
		limit int64
		size  int
		want  int
	}{
		"at the limit":    {1024, 1024, 0},
		"over the limit":  {1024, 1025, closeTooBig},
		"64-bit length":   {64 << 10, 1<<16 + 1, closeTooBig},
		"no limit":        {0, 1 << 20, 0},
		"negative = none": {-1, 1 << 20, 0},
	} {
		t.Run(name, func(t *testing.T) {
			for i := range 2 {
				p, s := newTestPolicy(tc.limit, 0)
				var mask *[4]byte
				if i == 0 {
					mask = &[4]byte{1, 2, 3, 4}
				}
				f := frame(true, 2, make([]byte, tc.size), mask)
				// The header alone decides: the payload need not have come.
				_, v := p.dirs[i].relayed(s, f[:14])
				if v.code != tc.want {
					t.Errorf("dir %d: verdict %d, want %d", i, v.code, tc.want)
				}
			}
		})
	}
}

// The client's silence, and only it, ends the socket with 4000 once
// idle_timeout has passed since its last bytes.
func TestPolicyIdleDeadline(t *testing.T) {
	const idle = 10 * time.Second
	p, _ := newTestPolicy(0, idle)
	if left, v := p.idleLeft(int64(4 * time.Second)); left != 6*time.Second || v.code != 0 {
		t.Errorf("4s after the start: %v left, verdict %d; want 6s, none", left, v.code)
	}
	p.clientSent(int64(8 * time.Second))
	if left, v := p.idleLeft(int64(12 * time.Second)); left != 6*time.Second || v.code != 0 {
		t.Errorf("4s after the client's bytes: %v left, verdict %d; want 6s, none", left, v.code)
	}
	if _, v := p.idleLeft(int64(18 * time.Second)); v.code != closeIdleTimeout {
		t.Errorf("idle_timeout after the client's bytes: verdict %d, want %d", v.code, closeIdleTimeout)
	}
	off, _ := newTestPolicy(0, 0)
	if _, v := off.idleLeft(int64(time.Hour)); v.code != 0 {
		t.Errorf("no idle timeout: verdict %d after an hour", v.code)
	}
}

// Edge's close frame goes only where a frame ends, carries the stop code
// and reason, and is masked toward the pod (edge is its client).
func TestPolicyCloseFrame(t *testing.T) {
	p, s := newTestPolicy(0, 0)
	if f := p.dirs[0].closeFrame(s); f != nil {
		t.Errorf("close frame % x without a stop code", f)
	}
	s.markStop(closePolicy, "call released")
	for i, wantMasked := range []bool{true, false} {
		f := p.dirs[i].closeFrame(s)
		if len(f) < 2 || f[1]&0x80 != 0 != wantMasked {
			t.Fatalf("dir %d: close frame % x, masked want %v", i, f, wantMasked)
		}
		var sc wsproto.Scanner
		sc.Scan(f, 0)
		if sc.CloseCode != closePolicy || !sc.AtBoundary() {
			t.Errorf("dir %d: frame reads as close %d, whole %v", i, sc.CloseCode, sc.AtBoundary())
		}
	}
	// Half a frame relayed: a close frame now would land in its payload.
	p.dirs[1].relayed(s, frame(true, 2, make([]byte, 300), nil)[:100])
	if f := p.dirs[1].closeFrame(s); f != nil {
		t.Errorf("close frame % x injected mid-frame", f)
	}
	if f := p.dirs[0].closeFrame(s); f == nil {
		t.Error("no close frame for the direction between frames")
	}
}

// The policy's share of relaying one Twilio-sized media frame read whole,
// the common case of both relays: about 30 ns on the 2 vCPU benchmark
// machine, where the relay costs 5-14 us of CPU per message
// (docs/bench-media.md).
func BenchmarkPolicyRelayed(b *testing.B) {
	p, s := newTestPolicy(64<<10, 0)
	f := frame(true, 1, make([]byte, 300), &[4]byte{1, 2, 3, 4})
	for b.Loop() {
		if _, v := p.dirs[0].relayed(s, f); v.code != 0 {
			b.Fatal(v.reason)
		}
	}
}

// A closing socket forwards the rest of the frame in flight and no more,
// wherever the reads split it, header included.
func TestPolicyUntilBoundary(t *testing.T) {
	f := frame(true, 2, make([]byte, 300), nil)
	next := frame(true, 1, []byte("next"), nil)
	for _, cut := range []int{0, 1, 3, 100, len(f) - 1} {
		p, s := newTestPolicy(0, 0)
		p.dirs[1].relayed(s, f[:cut])
		rest := append(append([]byte(nil), f[cut:]...), next...)
		n := p.dirs[1].untilBoundary(rest)
		if want := len(f) - cut; cut > 0 && n != want || cut == 0 && n != 0 {
			t.Errorf("cut at %d: %d bytes to the boundary, want %d", cut, n, map[bool]int{true: 0, false: want}[cut == 0])
		}
		if cut > 0 && !p.dirs[1].finishing() {
			t.Errorf("cut at %d: not finishing mid-frame", cut)
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
