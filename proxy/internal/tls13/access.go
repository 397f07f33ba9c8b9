package tls13

import (
	"errors"
	"net"
)

// What a relay loop reads of a record layer between its calls, and what it
// hands on: the record layer's state changes only through Open, Seal and
// the records it makes.

// Part is the start of an inbound record not yet complete: the caller puts
// it in front of the next bytes read before calling Open.
func (r *Records) Part() []byte { return r.part }

// PeerClosed reports whether the peer sent close_notify (Open ignores what
// follows it).
func (r *Records) PeerClosed() bool { return r.peerClosed }

// OwedUpdate reports whether the peer asked for edge's KeyUpdate
// (update_requested): KeyUpdate makes it, else Seal puts it before the
// next record.
func (r *Records) OwedUpdate() bool { return r.owedUpdate }

// CloseSent reports whether edge's close_notify was made (CloseNotify).
func (r *Records) CloseSent() bool { return r.closeSent }

// CloseNotify is edge's close_notify alert record; nothing is sealed after
// it, and a KeyUpdate still owed is not made.
func (r *Records) CloseNotify() []byte {
	r.closeSent, r.owedUpdate = true, false
	return r.AlertRecord(AlertCloseNotify)
}

// AlertOf is the alert a record failure err sends to the peer, if it
// sends one.
func AlertOf(err error) (desc byte, ok bool) {
	var a Alert
	if errors.As(err, &a) {
		return a.desc, true
	}
	return 0, false
}

// Conn is the taken-over connection: its TCP connection, whose records are
// the loop's from now on.
func (t *Takeover) Conn() *net.TCPConn { return t.conn }

// Records is the taken-over connection's record layer.
func (t *Takeover) Records() *Records { return t.rec }

// The two ends of a record layer for a peer of edge (a client written
// against edge's loops, in tests and tools): the keys of each direction
// from its traffic secret, as the hand-off makes them.

// NewKeys derives one direction's keys for the TLS 1.3 suite id from its
// traffic secret, at sequence number seq.
func NewKeys(suite uint16, secret []byte, seq uint64) (*Keys, error) {
	s := suiteByID(suite)
	if s == nil {
		return nil, errors.New("tls13: unsupported cipher suite")
	}
	return newKeys(s, secret, seq)
}

// NewRecords is a record layer opening with in and sealing with out.
func NewRecords(in, out *Keys) *Records { return &Records{in: in, out: out} }

// In and Out are the record layer's keys.
func (r *Records) In() *Keys  { return r.in }
func (r *Records) Out() *Keys { return r.out }

// SetPart replaces the partial inbound record (nil: none).
func (r *Records) SetPart(b []byte) { r.part = b }

// Seq is the sequence number of the next record under k.
func (k *Keys) Seq() uint64 { return k.seq }

// SetSeq sets the sequence number of the next record under k.
func (k *Keys) SetSeq(n uint64) { k.seq = n }

// Secret is k's current traffic secret (not a copy: do not change it).
func (k *Keys) Secret() []byte { return k.secret }
