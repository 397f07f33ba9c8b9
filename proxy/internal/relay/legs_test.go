package relay

import (
	"bytes"
	"testing"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

func mark(name string) []byte {
	return []byte(`{"event":"mark","streamSid":"MZ1","mark":{"name":"` + name + `"}}`)
}

// pass runs stream through t in chunks of n bytes (Filter toward the pod,
// Look toward the client) and returns what went on.
func pass(t *Tap, stream []byte, n int) []byte {
	var out []byte
	for len(stream) > 0 {
		k := min(n, len(stream))
		chunk := append([]byte(nil), stream[:k]...)
		stream = stream[k:]
		if t.src == Client {
			out = append(out, t.Filter(chunk)...)
		} else {
			t.Look(chunk)
			out = append(out, chunk...)
		}
	}
	return out
}

// The provider's answers to names an earlier leg's pod sent are cut out
// of the stream toward the pod, frames whole, however the bytes are cut
// into reads; everything else passes as it came: media, a mark nobody
// sent, a message over MaxLegMessage, a fragmented message whose frames
// look like marks, control frames.
func TestTapDropsAnswersToEarlierLegs(t *testing.T) {
	mask := &[4]byte{1, 2, 3, 4}
	client := func(op byte, fin bool, p []byte) []byte { return wsproto.Frame(fin, op, p, mask) }
	media := client(wsproto.OpText, true, []byte(`{"event":"media","media":{"payload":"AAAA"}}`))
	big := client(wsproto.OpText, true, append(mark("dead"), bytes.Repeat([]byte(" "), MaxLegMessage)...))
	fragmented := append(client(wsproto.OpText, false, mark("dead")), client(wsproto.OpContinuation, true, nil)...)
	ping := client(0x9, true, []byte("p"))
	for _, n := range []int{1, 2, 7, 64, 1 << 20} {
		l := NewLegs([]LegEvent{{Sent: "mark", Echo: "mark", Name: []string{"mark", "name"}}})
		toClient, toPod := NewTap(l, Pod), NewTap(l, Client)
		sent := append(wsproto.Frame(true, wsproto.OpText, mark("dead"), nil), wsproto.Frame(true, wsproto.OpText, mark("dead"), nil)...)
		sent = append(sent, wsproto.Frame(true, wsproto.OpBinary, bytes.Repeat([]byte{7}, 3000), nil)...)
		if got := pass(toClient, sent, n); !bytes.Equal(got, sent) {
			t.Fatalf("reads of %d: the pod's stream changed", n)
		}
		l.Moved()
		toClient.Reset()
		pass(toClient, wsproto.Frame(true, wsproto.OpText, mark("new"), nil), n)

		in := bytes.Join([][]byte{client(wsproto.OpText, true, mark("dead")), media, ping, big, fragmented,
			client(wsproto.OpText, true, mark("new")), client(wsproto.OpText, true, mark("dead")), client(wsproto.OpText, true, mark("nobody")), media}, nil)
		want := bytes.Join([][]byte{media, ping, big, fragmented, client(wsproto.OpText, true, mark("new")), client(wsproto.OpText, true, mark("nobody")), media}, nil)
		if got := pass(toPod, in, n); !bytes.Equal(got, want) {
			t.Errorf("reads of %d: %d bytes went to the pod, want %d", n, len(got), len(want))
		}
		if len(toPod.frame) != 0 || len(l.pending) != 0 {
			t.Errorf("reads of %d: %d bytes held, %d names pending after whole frames", n, len(toPod.frame), len(l.pending))
		}
	}
}

// A pod that sends names the provider never answers costs the socket at
// most maxPending of them; the oldest go first.
func TestLegsBoundTheNamesKept(t *testing.T) {
	l := NewLegs([]LegEvent{{Sent: "mark", Echo: "mark", Name: []string{"mark", "name"}}})
	for range maxPending + 10 {
		l.sent(mark("x"))
	}
	l.sent(mark("last"))
	if len(l.pending) != maxPending {
		t.Fatalf("%d names kept, want %d", len(l.pending), maxPending)
	}
	l.Moved()
	if !l.stale(mark("last")) || l.stale(mark("last")) {
		t.Error("the last name sent was not kept once")
	}
}
