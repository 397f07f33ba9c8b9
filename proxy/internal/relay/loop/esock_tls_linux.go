//go:build linux

package loop

import (
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The loop's side of a TLS client (esock.tls): what goes to it is sealed,
// a KeyUpdate it asks for is answered at once, and a broken record ends
// it. The records themselves are package tls13's.

// wire is plain as it goes to direction i's destination, appended to dst:
// sealed into records toward a TLS client, else as it is.
func (e *esock) wire(i int, dst, plain []byte) []byte {
	if i == 1 && e.tls != nil {
		if len(plain) == 0 {
			return dst
		}
		return e.tls.Seal(dst, tls13.RecordTypeData, plain)
	}
	return append(dst, plain...)
}

// answerKeyUpdate sends edge's KeyUpdate at once when the client asked for
// one (update_requested) and nothing waits for the client; else the answer
// goes out before the next record sealed. False when the socket ended.
func (l *eloop) answerKeyUpdate(e *esock) bool {
	d := &e.dirs[1]
	if e.tls.CloseSent() {
		// Nothing follows edge's close_notify.
		return true
	}
	if d.pend != nil {
		// Bytes already wait for the client: the answer stays owed and
		// seal puts it before the next record (RFC 8446 4.6.3), so a client
		// that asks again and again without reading gets one answer, not
		// one queued per request.
		return true
	}
	d.pend = e.tls.KeyUpdate(nil)
	if !l.flush(e, d) {
		return false
	}
	if d.pend != nil && !e.done {
		l.update(e)
	}
	return !e.done
}

// tlsFailed ends a socket whose client broke the TLS record protocol (a
// record that does not authenticate, is oversized or malformed, a
// forbidden message, its fatal alert): as a reset of the client would, with
// the alert sent first where the stream toward the client is between
// records.
func (l *eloop) tlsFailed(e *esock, err error) bool {
	l.o.Log.Debug("tls record failure", "err", err, "call_sid", e.s.CallID)
	if desc, ok := tls13.AlertOf(err); ok && e.dirs[1].pend == nil {
		relay.RawWrite(e.fds[0], e.tls.AlertRecord(desc))
	}
	l.teardown(e, relay.Client)
	return false
}
