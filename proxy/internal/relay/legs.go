package relay

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"sync"
)

// A socket that moves has legs: one per pod it was relayed to. A provider
// answers some of a pod's messages later, by name (Twilio echoes a mark
// once the audio sent before it has played): after a move, the answers to
// what a dead pod sent would reach the new pod, which never sent them and
// would take them for its own. Legs records the names each leg's pod sent
// (Socket.Legs declares which messages) and tells which of the provider's
// answers belong to an earlier leg: those are not relayed.
//
// The relay is a byte relay: reading a message means parsing its frames.
// Only sockets that may move and whose provider declares leg events pay
// for it (Tap), and only single-frame text messages of at most
// MaxLegMessage bytes are read: a provider's answers and a pod's named
// messages are small JSON objects; anything else passes untouched.

// MaxLegMessage bounds a frame a Tap reads (its payload): toward the pod,
// a frame that may be dropped is held until it is whole, so this is also
// what a socket holds at most of the provider's stream (its header
// included), once per direction.
const MaxLegMessage = 1 << 10

// maxPending bounds the names a socket remembers: a pod that sends names
// the provider never answers would otherwise grow them for the call's life.
// Past it the oldest is forgotten, and its answer, should it come, is
// relayed.
const maxPending = 256

// LegEvent is a pair of messages by name: the pod's message of event Sent
// names something at path Name (object keys), and the provider answers
// with a message of event Echo carrying the same name at the same path.
type LegEvent struct {
	Sent, Echo string
	Name       []string
}

// Legs is what a socket's legs sent of its LegEvents: shared by both
// directions of the socket (the pod's records, the client's consumes),
// under its own lock, taken only for a message of a declared event.
type Legs struct {
	events []LegEvent
	// quoted are the events as JSON strings, for a cheap look before a
	// message is parsed.
	quoted [][]byte
	mu     sync.Mutex
	leg    int
	// pending are the names sent and not answered yet, oldest first.
	pending []pending
}

type pending struct {
	event int // index in events
	name  string
	leg   int
}

// NewLegs returns the legs of a socket whose provider answers events.
func NewLegs(events []LegEvent) *Legs {
	l := &Legs{events: events}
	for _, e := range events {
		for _, ev := range []string{e.Sent, e.Echo} {
			q, _ := json.Marshal(ev)
			l.quoted = append(l.quoted, q)
		}
	}
	return l
}

// Moved starts the socket's next leg: what the pods before sent is theirs.
func (l *Legs) Moved() {
	l.mu.Lock()
	l.leg++
	l.mu.Unlock()
}

// sent records, for the current leg, the names a pod's message carries.
func (l *Legs) sent(msg []byte) {
	for i, e := range l.events {
		name, ok := l.named(msg, i, e.Sent)
		if !ok {
			continue
		}
		l.mu.Lock()
		if len(l.pending) >= maxPending {
			l.pending = append(l.pending[:0], l.pending[1:]...)
		}
		l.pending = append(l.pending, pending{event: i, name: name, leg: l.leg})
		l.mu.Unlock()
	}
}

// stale reports whether a provider's message answers a name an earlier
// leg's pod sent: the oldest of that name pending, since a provider
// answers in the order it was asked. An answer to nothing recorded is not
// stale.
func (l *Legs) stale(msg []byte) bool {
	for i, e := range l.events {
		name, ok := l.named(msg, i, e.Echo)
		if !ok {
			continue
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for j, p := range l.pending {
			if p.event == i && p.name == name {
				l.pending = append(l.pending[:j], l.pending[j+1:]...)
				return p.leg < l.leg
			}
		}
		return false
	}
	return false
}

// named is the name a message of event carries at event i's path, if msg
// is such a message. A message without the event's JSON string anywhere
// is not parsed (media, the bulk of a stream, never is).
func (l *Legs) named(msg []byte, i int, event string) (string, bool) {
	q := l.quoted[2*i]
	if event != l.events[i].Sent {
		q = l.quoted[2*i+1]
	}
	if !bytes.Contains(msg, q) {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return "", false
	}
	var ev string
	if json.Unmarshal(m["event"], &ev) != nil || ev != event {
		return "", false
	}
	path := l.events[i].Name
	for _, k := range path[:len(path)-1] {
		var inner map[string]json.RawMessage
		if json.Unmarshal(m[k], &inner) != nil {
			return "", false
		}
		m = inner
	}
	var name string
	if json.Unmarshal(m[path[len(path)-1]], &name) != nil {
		return "", false
	}
	return name, true
}

// Tap reads one direction's messages for Legs. Toward the client it only
// looks (the pod's messages record their names); toward the pod it holds
// each frame it reads until the frame is whole and drops the provider's
// answers to earlier legs (Filter), so what it passes on is the stream
// with those frames cut out, frames whole: the frame accounting that
// follows it sees a stream that never had them. A Tap is owned by the
// reader of its direction.
type Tap struct {
	legs *Legs
	src  Side
	// skip is what is left of a frame the tap does not read (passed on as
	// it comes); inMsg: a fragmented data message is open, whose frames
	// are never read.
	skip  uint64
	inMsg bool
	// frame is the frame being read so far: toward the client a copy (its
	// bytes were passed on), toward the pod the bytes held back.
	frame []byte
	// scratch holds a masked frame's payload, unmasked (payload).
	scratch []byte
}

// NewTap returns the tap of the direction reading src.
func NewTap(l *Legs, src Side) *Tap { return &Tap{legs: l, src: src} }

// Reset starts the tap on a new stream (a new pod's, after a move).
func (t *Tap) Reset() {
	t.skip, t.inMsg, t.frame = 0, false, t.frame[:0]
}

// Look reads b, the next bytes from the pod, which pass on unchanged.
func (t *Tap) Look(b []byte) {
	for len(b) > 0 {
		if t.skip > 0 {
			n := min(t.skip, uint64(len(b)))
			t.skip -= n
			b = b[n:]
			continue
		}
		need, whole := t.need(t.frame)
		if need == 0 {
			// Not a frame the tap reads: the rest of it passes.
			t.frame = t.frame[:0]
			continue
		}
		n := min(need-len(t.frame), len(b))
		t.frame = append(t.frame, b[:n]...)
		b = b[n:]
		if len(t.frame) < need {
			return
		}
		if whole {
			t.legs.sent(t.payload(t.frame))
			t.frame = t.frame[:0]
		}
	}
}

// Filter reads b, the next bytes from the client, and returns what goes
// on to the pod now: the bytes held from before and b, without the frames
// that answer an earlier leg and without the tail of a frame not yet
// whole (held for the next call). It may reuse b's memory for its result.
func (t *Tap) Filter(b []byte) []byte {
	in := b
	if len(t.frame) > 0 {
		in = append(t.frame, b...)
		t.frame = nil
	}
	w, r := 0, 0
	for r < len(in) {
		if t.skip > 0 {
			n := int(min(t.skip, uint64(len(in)-r)))
			w += copy(in[w:], in[r:r+n])
			r += n
			t.skip -= uint64(n)
			continue
		}
		need, whole := t.need(in[r:])
		if need == 0 {
			hl := headerLen(in[r:])
			w += copy(in[w:], in[r:r+hl])
			r += hl
			continue
		}
		if len(in)-r < need {
			break
		}
		if !whole {
			break // unreachable: a whole header gives the frame's size
		}
		f := in[r : r+need]
		if !t.legs.stale(t.payload(f)) {
			w += copy(in[w:], f)
		}
		r += need
	}
	if r < len(in) {
		// The held bytes never share in's memory: the caller writes
		// in[:w] after this returns.
		t.frame = append([]byte(nil), in[r:]...)
	}
	return in[:w]
}

// need says how many bytes of the frame that f begins the tap needs: the
// header's, while f holds less (whole false), then the whole frame's for
// a frame it reads (whole true). 0: f's header is whole and the tap does
// not read the frame; it set skip to the frame's payload and noted the
// message state.
func (t *Tap) need(f []byte) (n int, whole bool) {
	if len(f) < 2 {
		return 2, false
	}
	hl := headerLen(f)
	if len(f) < hl {
		return hl, false
	}
	b0, b1 := f[0], f[1]
	length := uint64(b1 & 0x7f)
	switch length {
	case 126:
		length = uint64(binary.BigEndian.Uint16(f[2:4]))
	case 127:
		length = binary.BigEndian.Uint64(f[2:10])
	}
	masked := b1&0x80 != 0
	opcode, fin := b0&0x0f, b0&0x80 != 0
	// A single-frame text message, without reserved bits, masked as its
	// source must: what a provider's answer or a pod's named message is.
	if b0 == 0x81 && !t.inMsg && masked == (t.src == Client) && length <= MaxLegMessage {
		return hl + int(length), true
	}
	if opcode <= 0x2 {
		t.inMsg = !fin
	}
	t.skip = length
	return 0, false
}

// headerLen is the length of the frame header f begins (f holds at least
// its first two bytes).
func headerLen(f []byte) int {
	n := 2
	switch f[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// payload is a whole frame's payload, unmasked: in the tap's own scratch
// buffer when masked (one per direction, reused: the provider's stream is
// read frame by frame, and a copy per message showed as garbage).
func (t *Tap) payload(f []byte) []byte {
	hl := headerLen(f)
	p := f[hl:]
	if f[1]&0x80 == 0 {
		return p
	}
	mask := f[hl-4 : hl]
	t.scratch = append(t.scratch[:0], p...)
	for i := range t.scratch {
		t.scratch[i] ^= mask[i%4]
	}
	return t.scratch
}
