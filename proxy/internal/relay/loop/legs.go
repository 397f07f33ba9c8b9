package loop

import "github.com/edge-voice/edge/proxy/internal/relay"

// mover is what a socket that may move (relay.Socket.Resume) carries on
// either loop besides its policy: the legs' taps, which keep the
// provider's answers to a dead pod's messages from the next pod, and,
// after a move, whether the new pod is still owed nothing of a client
// message the dead one had part of. The zero value, for every other
// socket, looks at nothing.
type mover struct {
	// drop: the socket moved, and the rest of a client message the dead
	// pod had part of goes nowhere (relay.DirPolicy.DropPartial).
	drop bool
	// legs and taps, where the provider answers its pods' messages by
	// name (relay.Legs): taps[0] reads the client's stream, taps[1] the
	// pod's.
	legs *relay.Legs
	taps [2]*relay.Tap
}

// init readies m and p for s before anything is relayed: the stream's
// opening kept, the legs' taps made.
func (m *mover) init(s *relay.Socket, p *relay.Policy) {
	if !s.Resume {
		return
	}
	p.Dirs[0].Keep(s.Opening, s.OpeningMax)
	if len(s.Legs) > 0 {
		m.legs = relay.NewLegs(s.Legs)
		m.taps = [2]*relay.Tap{relay.NewTap(m.legs, relay.Client), relay.NewTap(m.legs, relay.Pod)}
	}
}

// look shows b, the next bytes of direction i's source, to the taps and
// the drop before the policy sees them, and returns what goes on (it may
// reuse b's memory; nothing, for a socket that may not move, costs more
// than two nil checks).
func (m *mover) look(p *relay.Policy, i int, b []byte) []byte {
	if t := m.taps[i]; t != nil {
		if i == 0 {
			b = t.Filter(b)
		} else {
			t.Look(b)
		}
	}
	if i == 0 && m.drop && len(b) > 0 {
		d := &p.Dirs[0]
		k := d.DropPartial(b)
		m.drop = k == len(b) && !d.BetweenMessages()
		b = b[k:]
	}
	return b
}

// moved starts the socket's next leg, on a new pod.
func (m *mover) moved(p *relay.Policy, now int64) {
	p.Live.Reset(now)
	m.drop = true
	if m.legs != nil {
		m.legs.Moved()
		m.taps[1].Reset()
	}
}
