package tls13

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// How a TLS media socket reaches the epoll relay. crypto/tls does the
// handshake and serves the HTTP upgrade; once the socket is relayed, its
// records are the loop's (record.go). To take them over, edge needs the
// connection's TLS 1.3 application traffic secrets and the sequence number
// of each direction at that moment, and every byte crypto/tls read but
// did not hand on:
//   - secrets: the listener's tls.Config gives each connection a clone
//     whose KeyLogWriter fills that connection's slot (never a file, never
//     a log line);
//   - sequence numbers: the raw connection under the tls.Conn watches the
//     records that pass and trial-opens them with those secrets, counting
//     the ones under the application keys (the server's session tickets,
//     sent only to a client that offers resumption, and the 101 going
//     out; the client's upgrade request coming in), without keeping a
//     copy of any (watch.go);
//   - bytes held: after the hijack, the tls.Conn is read until it would
//     need the network (the raw connection then answers "not now"): what
//     it returns is plaintext for the pod, and what stays in it is at most
//     the header of the next record, which the watcher knows too.
// Anything unexpected (TLS 1.2, another suite, a record the watcher cannot
// open, a KeyUpdate before the hand-off, more records than a media socket's
// upgrade needs, a read cut short inside a record) leaves the socket to
// crypto/tls on the goroutine relay. From the hand-off on, crypto/tls
// writes nothing on the connection.

// Listener serves TLS on inner with cfg, as tls.NewListener does, and lets
// the media proxy take over the records of the sockets it relays on its
// event loops (Take). Connections other than TCP are served as by
// tls.NewListener.
func Listener(inner net.Listener, cfg *tls.Config) net.Listener {
	base := cfg.Clone()
	c := cfg.Clone()
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		chosen := base
		if base.GetConfigForClient != nil {
			cc, err := base.GetConfigForClient(hello)
			if err != nil {
				return nil, err
			}
			if cc != nil {
				chosen = cc
			}
		}
		rc, ok := hello.Conn.(*tlsRaw)
		if !ok {
			return chosen, nil
		}
		// A clone per connection: its KeyLogWriter is this connection's
		// slot. Session ticket keys stay the listener config's (crypto/tls
		// uses the original config's unless the clone set its own).
		per := chosen.Clone()
		per.GetConfigForClient = nil
		per.KeyLogWriter = keyLog{rc}
		return per, nil
	}
	return &tlsListener{Listener: inner, cfg: c}
}

type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		c = &tlsRaw{TCPConn: tc, out: recordWatch{dir: 1}}
	}
	return tls.Server(c, l.cfg), nil
}

// tlsRaw is the TCP connection under a tls.Conn of Listener: it keeps
// the connection's traffic secrets from the key log and watches its
// records (watch.go).
type tlsRaw struct {
	*net.TCPConn
	mu sync.Mutex
	// secrets: the client's and the server's application traffic
	// secrets, from the key log (nil until it writes, at the end of the
	// handshake).
	secrets *[2][]byte
	in, out recordWatch
	// gaveUp: the hand-off is impossible; watching stopped.
	gaveUp atomic.Bool
	// paused: the hand-off reads what the tls.Conn holds; a Read must not
	// touch the socket.
	paused atomic.Bool
	// handedOff: a loop owns the connection's records; crypto/tls writes
	// nothing more (its records would take sequence numbers the loop
	// uses, its close_notify would end the loop's stream).
	handedOff atomic.Bool
}

// errPaused is a Read during the hand-off: temporary, so that the tls.Conn
// keeps its state (and can still serve the goroutine relay).
var errPaused = pausedError{}

type pausedError struct{}

func (pausedError) Error() string   { return "tls hand-off: would block" }
func (pausedError) Timeout() bool   { return true }
func (pausedError) Temporary() bool { return true }

// keyLog is the KeyLogWriter of one connection's config: lines "LABEL
// <client random> <secret>" (crypto/tls Config.writeKeyLog). Only the
// TLS 1.3 application traffic secrets are kept, in memory; a TLS 1.2
// connection (CLIENT_RANDOM) is never taken over.
type keyLog struct{ rc *tlsRaw }

func (k keyLog) Write(line []byte) (int, error) {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return len(line), nil
	}
	i := -1
	switch string(f[0]) {
	case "CLIENT_TRAFFIC_SECRET_0":
		i = 0
	case "SERVER_TRAFFIC_SECRET_0":
		i = 1
	case "CLIENT_RANDOM":
		k.rc.giveUp()
		return len(line), nil
	default:
		return len(line), nil
	}
	secret := make([]byte, hex.DecodedLen(len(f[2])))
	if _, err := hex.Decode(secret, f[2]); err != nil {
		return len(line), nil
	}
	k.rc.mu.Lock()
	defer k.rc.mu.Unlock()
	if k.rc.gaveUp.Load() {
		// No hand-off: the secret is not kept (giveUp wiped the others).
		clear(secret)
		return len(line), nil
	}
	if k.rc.secrets == nil {
		k.rc.secrets = new([2][]byte)
	}
	k.rc.secrets[i] = secret
	return len(line), nil
}

// secret is a copy of direction i's secret (nil: not known yet).
func (rc *tlsRaw) secret(i int) []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.secrets == nil {
		return nil
	}
	return append([]byte(nil), rc.secrets[i]...)
}

// giveUp stops the watch for good. Each direction's watcher drops its own
// state at its next call (they run on other goroutines).
func (rc *tlsRaw) giveUp() {
	rc.gaveUp.Store(true)
	rc.mu.Lock()
	if rc.secrets != nil {
		clear(rc.secrets[0])
		clear(rc.secrets[1])
		rc.secrets = nil
	}
	rc.mu.Unlock()
}

// StopWatch ends the record watch of a connection that crypto/tls
// keeps (the goroutine relay carries it).
func StopWatch(tc *tls.Conn) {
	if rc, ok := tc.NetConn().(*tlsRaw); ok {
		rc.giveUp()
	}
}

// Takeover is a TLS media socket's state taken from crypto/tls: its TCP
// connection and the record layer to drive it with.
type Takeover struct {
	conn *net.TCPConn
	rec  *Records
	raw  *tlsRaw
}

// giveBack returns a takeover the loops could not carry to crypto/tls,
// whose state is as the hand-off left it: the goroutine relay serves the
// connection, and crypto/tls may write again.
func (t *Takeover) GiveBack() {
	t.rec.Wipe()
	t.raw.handedOff.Store(false)
}

// Take takes over tc's records after the hijack, and returns the
// plaintext that tc held (for the pod, after the hijack's own buffered
// bytes). A nil takeover leaves tc usable, with the returned plaintext
// read from it: the goroutine relay serves it. From a takeover on,
// crypto/tls writes nothing on the connection (giveBack undoes it).
func Take(tc *tls.Conn) (*Takeover, []byte) {
	rc, ok := tc.NetConn().(*tlsRaw)
	if !ok || rc.gaveUp.Load() {
		return nil, nil
	}
	st := tc.ConnectionState()
	suite := suiteByID(st.CipherSuite)
	if st.Version != tls.VersionTLS13 || suite == nil {
		rc.giveUp()
		return nil, nil
	}
	// Read what tc holds: decrypted and unread, or whole records not yet
	// decrypted. Its Read comes back with errPaused once it needs the
	// socket.
	rc.paused.Store(true)
	var held []byte
	buf := make([]byte, 4<<10)
	var err error
	for {
		var n int
		n, err = tc.Read(buf)
		held = append(held, buf[:n]...)
		if err != nil {
			break
		}
	}
	rc.paused.Store(false)
	if !errors.Is(err, errPaused) || rc.gaveUp.Load() {
		// A close_notify, a bad record: tc has its error and says so to
		// the goroutine relay.
		rc.giveUp()
		return nil, held
	}
	in, out := &rc.in, &rc.out
	if !in.found || !out.found || in.keys[0].suite != suite || out.keys[0].suite != suite || out.hdrN != 0 {
		rc.giveUp()
		return nil, held
	}
	inKeys, err1 := newKeys(suite, rc.secret(0), uint64(in.seq))
	outKeys, err2 := newKeys(suite, rc.secret(1), uint64(out.seq))
	if err1 != nil || err2 != nil {
		rc.giveUp()
		return nil, held
	}
	// What crypto/tls read of the next record is its header at most (the
	// watch reads a body whole, or gives up): the watch's copy of it
	// starts the loop's first read.
	t := &Takeover{conn: rc.TCPConn, raw: rc, rec: &Records{in: inKeys, out: outKeys, useless: int(in.useless)}}
	if in.hdrN > 0 {
		t.rec.part = append([]byte(nil), in.hdr[:in.hdrN]...)
	}
	rc.handedOff.Store(true)
	rc.giveUp()
	rc.in, rc.out = recordWatch{}, recordWatch{}
	return t, held
}
