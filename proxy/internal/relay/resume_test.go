package relay

import (
	"bytes"
	"testing"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// A direction asked to keep its stream's opening keeps what it forwarded
// until the messages asked for have passed whole (at the end of a read
// between messages), in any chunking, and nothing when they do not fit.
func TestPolicyKeepsTheOpening(t *testing.T) {
	mask := &[4]byte{5, 6, 7, 8}
	opening := append(wsproto.Frame(true, 1, []byte(`{"event":"connected"}`), mask),
		wsproto.Frame(true, 1, []byte(`{"event":"start"}`), mask)...)
	stream := append(append([]byte(nil), opening...), wsproto.Frame(true, 1, []byte(`{"event":"media"}`), mask)...)
	for _, chunk := range []int{1, 3, len(opening), len(stream)} {
		p, s := newTestPolicy(0, 0)
		d := &p.Dirs[0]
		d.Keep(2, 1024)
		for b := stream; len(b) > 0; {
			n := min(chunk, len(b))
			if _, ok := d.Kept(); ok && len(stream)-len(b) < len(opening) {
				t.Fatalf("chunks of %d: kept after %d bytes, before the opening was whole", chunk, len(stream)-len(b))
			}
			d.Relayed(s, b[:n])
			b = b[n:]
		}
		kept, ok := d.Kept()
		// A read that ends the second message may carry more behind it:
		// what was kept starts with the opening.
		if !ok || !bytes.HasPrefix(kept, opening) {
			t.Errorf("chunks of %d: kept % x, %v", chunk, kept, ok)
		}
		msgs, err := wsproto.FirstMessages(kept, 2)
		if err != nil || string(msgs[1].Payload) != `{"event":"start"}` {
			t.Errorf("chunks of %d: the kept opening reads %q, %v", chunk, msgs, err)
		}
	}
	p, s := newTestPolicy(0, 0)
	p.Dirs[0].Keep(2, len(opening)-1)
	p.Dirs[0].Relayed(s, stream)
	if kept, ok := p.Dirs[0].Kept(); ok || kept != nil {
		t.Errorf("an opening over the bound: kept %d bytes, %v", len(kept), ok)
	}
	if _, ok := p.Dirs[1].Kept(); ok {
		t.Error("a direction not asked to keep kept something")
	}
}

// After a move, the new pod gets nothing of the message the dead one was
// given part of: its remaining bytes, continuation frames included, are
// dropped, and the next message goes whole.
func TestDropPartialSkipsToTheNextMessage(t *testing.T) {
	mask := &[4]byte{1, 1, 2, 2}
	first := wsproto.Frame(false, 1, bytes.Repeat([]byte("a"), 100), mask)
	ping := wsproto.Frame(true, 9, nil, mask)
	last := wsproto.Frame(true, 0, bytes.Repeat([]byte("b"), 50), mask)
	next := wsproto.Frame(true, 1, []byte(`{"event":"media"}`), mask)
	for cut := 1; cut < len(first); cut += 7 {
		p, s := newTestPolicy(0, 0)
		d := &p.Dirs[0]
		d.Relayed(s, first[:cut]) // the dead pod had these
		if d.BetweenMessages() {
			t.Fatal("inside a message, the direction says it is between messages")
		}
		rest := bytes.Join([][]byte{first[cut:], ping, last, next}, nil)
		k := d.DropPartial(rest)
		if !bytes.Equal(rest[k:], next) || !d.BetweenMessages() {
			t.Fatalf("cut at %d: kept % x, want the next message % x", cut, rest[k:], next)
		}
		if n, v := d.Relayed(s, rest[k:]); n != len(next) || v.Code != 0 {
			t.Fatalf("cut at %d: the next message relays %d bytes, %+v", cut, n, v)
		}
	}
	p, s := newTestPolicy(0, 0)
	p.Dirs[0].Relayed(s, next)
	if k := p.Dirs[0].DropPartial(next); k != 0 {
		t.Errorf("between messages, %d bytes dropped", k)
	}
}

// The opening a socket keeps comes from the client, a stranger: whatever
// bytes it sends, in whatever reads, keeping them, reading the kept
// messages and framing them again for a new pod neither panics nor
// changes a payload, and dropping a partial message never reaches past
// what it was given.
func FuzzKeptOpening(f *testing.F) {
	mask := &[4]byte{1, 2, 3, 4}
	f.Add(append(wsproto.Frame(true, 1, []byte(`{"event":"connected"}`), mask),
		wsproto.Frame(true, 1, []byte(`{"event":"start"}`), mask)...), uint8(7))
	f.Add(append(wsproto.Frame(false, 1, []byte(`{"ev`), mask), wsproto.Frame(true, 0, []byte(`ent":"x"}`), mask)...), uint8(1))
	f.Add([]byte{0x81, 0xff, 0, 0, 0, 0, 0, 0, 0, 9}, uint8(3))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		p, s := newTestPolicy(1<<16, 0)
		d := &p.Dirs[0]
		d.Keep(2, 4<<10)
		step := int(chunk%32) + 1
		for b := stream; len(b) > 0; {
			n := min(step, len(b))
			d.Relayed(s, b[:n])
			b = b[n:]
		}
		if kept, ok := d.Kept(); ok {
			msgs, err := wsproto.FirstMessages(kept, 2)
			if err == nil {
				var again []byte
				for _, m := range msgs {
					again = append(again, wsproto.Frame(true, m.Opcode, m.Payload, mask)...)
				}
				back, err := wsproto.FirstMessages(again, len(msgs))
				if err != nil || len(back) != len(msgs) {
					t.Fatalf("framed again: %v, %d messages of %d", err, len(back), len(msgs))
				}
				for i := range msgs {
					if !bytes.Equal(back[i].Payload, msgs[i].Payload) || back[i].Opcode != msgs[i].Opcode {
						t.Fatalf("message %d changed when framed again", i)
					}
				}
			}
		}
		if k := d.DropPartial(stream); k < 0 || k > len(stream) {
			t.Fatalf("DropPartial = %d of %d bytes", k, len(stream))
		}
	})
}
