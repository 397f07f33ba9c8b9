package relay

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// newTestPolicy is a policy of a socket started at clock 0, with its own
// unregistered counters.
func newTestPolicy(limit int64, idle time.Duration) (*Policy, *Socket) {
	var p Policy
	c := func(name string) prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: name}) }
	p.Init(Limits{MaxMessageBytes: limit, IdleTimeout: idle}, &[2]Counters{
		{Bytes: c("in_bytes"), Messages: c("in_messages")},
		{Bytes: c("out_bytes"), Messages: c("out_messages")},
	}, 0, false)
	return &p, &Socket{}
}

// Both relays hand the policy whatever their reads return: the same
// stream must account the same in any chunking.
func TestPolicyAccountsEachDirection(t *testing.T) {
	mask := &[4]byte{9, 8, 7, 6}
	closeBody := binary.BigEndian.AppendUint16(nil, 4100)
	toPod := bytes.Join([][]byte{
		wsproto.Frame(true, 1, []byte(`{"event":"media"}`), mask),
		wsproto.Frame(false, 2, bytes.Repeat([]byte{1}, 200), mask),
		wsproto.Frame(true, 0, bytes.Repeat([]byte{2}, 200), mask),
		wsproto.Frame(true, 9, nil, mask),
	}, nil)
	toClient := bytes.Join([][]byte{
		wsproto.Frame(true, 1, []byte("hello"), nil),
		wsproto.Frame(true, 8, append(closeBody, "bye"...), nil),
	}, nil)
	for _, chunk := range []int{1, 5, 64, 1 << 20} {
		p, s := newTestPolicy(1024, 0)
		for i, stream := range [][]byte{toClient, toPod} {
			d := &p.Dirs[1-i]
			for b := stream; len(b) > 0; {
				n := min(chunk, len(b))
				if _, v := d.Relayed(s, b[:n]); v.Code != 0 {
					t.Fatalf("chunks of %d: verdict %+v within the limit", chunk, v)
				}
				b = b[n:]
			}
		}
		in, out := p.Dirs[0].bytes, p.Dirs[1].bytes
		if in != int64(len(toPod)) || out != int64(len(toClient)) {
			t.Errorf("chunks of %d: bytes %d/%d, want %d/%d", chunk, in, out, len(toPod), len(toClient))
		}
		for i, want := range []float64{2, 1} {
			c := p.Dirs[i].counter
			if got := value(c.Messages); got != want {
				t.Errorf("chunks of %d: dir %d messages %v, want %v", chunk, i, got, want)
			}
			if got := value(c.Bytes); got != float64(p.Dirs[i].bytes) {
				t.Errorf("chunks of %d: dir %d bytes counter %v, want %d", chunk, i, got, p.Dirs[i].bytes)
			}
		}
		if r := s.Result(); r.By != Pod || r.Code != 4100 {
			t.Errorf("chunks of %d: closed by %v with %d, want the pod with 4100", chunk, r.By, r.Code)
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
		"over the limit":  {1024, 1025, wsproto.CloseTooBig},
		"64-bit length":   {64 << 10, 1<<16 + 1, wsproto.CloseTooBig},
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
				f := wsproto.Frame(true, 2, make([]byte, tc.size), mask)
				// The header alone decides: the payload need not have come.
				_, v := p.Dirs[i].Relayed(s, f[:14])
				if v.Code != tc.want {
					t.Errorf("dir %d: verdict %d, want %d", i, v.Code, tc.want)
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
	if left, v := p.IdleLeft(int64(4 * time.Second)); left != 6*time.Second || v.Code != 0 {
		t.Errorf("4s after the start: %v left, verdict %d; want 6s, none", left, v.Code)
	}
	p.ClientSent(int64(8 * time.Second))
	if left, v := p.IdleLeft(int64(12 * time.Second)); left != 6*time.Second || v.Code != 0 {
		t.Errorf("4s after the client's bytes: %v left, verdict %d; want 6s, none", left, v.Code)
	}
	if _, v := p.IdleLeft(int64(18 * time.Second)); v.Code != CloseIdleTimeout {
		t.Errorf("idle_timeout after the client's bytes: verdict %d, want %d", v.Code, CloseIdleTimeout)
	}
	off, _ := newTestPolicy(0, 0)
	if _, v := off.IdleLeft(int64(time.Hour)); v.Code != 0 {
		t.Errorf("no idle timeout: verdict %d after an hour", v.Code)
	}
}

// Edge's close frame goes only where a frame ends, carries the stop code
// and reason, and is masked toward the pod (edge is its client).
func TestPolicyCloseFrame(t *testing.T) {
	p, s := newTestPolicy(0, 0)
	if f := p.Dirs[0].CloseFrame(s); f != nil {
		t.Errorf("close frame % x without a stop code", f)
	}
	s.MarkStop(wsproto.ClosePolicy, "call released")
	for i, wantMasked := range []bool{true, false} {
		f := p.Dirs[i].CloseFrame(s)
		if len(f) < 2 || f[1]&0x80 != 0 != wantMasked {
			t.Fatalf("dir %d: close frame % x, masked want %v", i, f, wantMasked)
		}
		var sc wsproto.Scanner
		sc.Scan(f, 0)
		if sc.CloseCode != wsproto.ClosePolicy || !sc.AtBoundary() {
			t.Errorf("dir %d: frame reads as close %d, whole %v", i, sc.CloseCode, sc.AtBoundary())
		}
	}
	// Half a frame relayed: a close frame now would land in its payload.
	p.Dirs[1].Relayed(s, wsproto.Frame(true, 2, make([]byte, 300), nil)[:100])
	if f := p.Dirs[1].CloseFrame(s); f != nil {
		t.Errorf("close frame % x injected mid-frame", f)
	}
	if f := p.Dirs[0].CloseFrame(s); f == nil {
		t.Error("no close frame for the direction between frames")
	}
}

// The policy's share of relaying one Twilio-sized media frame read whole,
// the common case of both relays: about 30 ns on the 2 vCPU benchmark
// machine, where the relay costs 5-14 us of CPU per message
// (docs/bench-media.md).
func BenchmarkPolicyRelayed(b *testing.B) {
	p, s := newTestPolicy(64<<10, 0)
	f := wsproto.Frame(true, 1, make([]byte, 300), &[4]byte{1, 2, 3, 4})
	for b.Loop() {
		if _, v := p.Dirs[0].Relayed(s, f); v.Code != 0 {
			b.Fatal(v.Reason)
		}
	}
}

// A closing socket forwards the rest of the frame in flight and no more,
// wherever the reads split it, header included.
func TestPolicyUntilBoundary(t *testing.T) {
	f := wsproto.Frame(true, 2, make([]byte, 300), nil)
	next := wsproto.Frame(true, 1, []byte("next"), nil)
	for _, cut := range []int{0, 1, 3, 100, len(f) - 1} {
		p, s := newTestPolicy(0, 0)
		p.Dirs[1].Relayed(s, f[:cut])
		rest := append(append([]byte(nil), f[cut:]...), next...)
		n := p.Dirs[1].UntilBoundary(rest)
		if want := len(f) - cut; cut > 0 && n != want || cut == 0 && n != 0 {
			t.Errorf("cut at %d: %d bytes to the boundary, want %d", cut, n, map[bool]int{true: 0, false: want}[cut == 0])
		}
		if cut > 0 && !p.Dirs[1].Finishing() {
			t.Errorf("cut at %d: not finishing mid-frame", cut)
		}
	}
}

// value reads a counter.
func value(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		panic(err)
	}
	return d.Counter.GetValue()
}
