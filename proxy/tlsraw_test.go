package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/proxy/internal/tls13"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// rawTLSClient is a media client that does its handshake and upgrade with
// crypto/tls, then seals and opens its records with the loop's own record
// layer (tls13.Records), keyed from crypto/tls's client key log: the only way
// to send what crypto/tls never sends as a client (a KeyUpdate, a broken
// record). Edge's side stays checked by crypto/tls wherever it can be
// (TestTLSEdgeKeyUpdateReadByCryptoTLS, the openssl tests).
type rawTLSClient struct {
	t    *testing.T
	conn net.Conn
	rec  *tls13.Records
	// inSeqKnown: the first record from edge fixed the read sequence
	// number (edge's session tickets and 101 came before it).
	inSeqKnown bool
	pending    []byte // ciphertext read, not yet opened
}

type secretLog struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (l *secretLog) Write(line []byte) (int, error) {
	f := strings.Fields(string(line))
	if len(f) == 3 {
		s, _ := hex.DecodeString(f[2])
		l.mu.Lock()
		l.m[f[0]] = s
		l.mu.Unlock()
	}
	return len(line), nil
}

func (f *tlsFront) rawClient(t *testing.T, e *env, url string) *rawTLSClient {
	t.Helper()
	u := f.wss(e, url)
	path := u[strings.Index(u[len("wss://"):], "/")+len("wss://"):]
	tcp, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	tcp.SetDeadline(time.Now().Add(10 * time.Second))
	log := &secretLog{m: map[string][]byte{}}
	cfg := f.client.Clone()
	cfg.MinVersion, cfg.KeyLogWriter = tls.VersionTLS13, log
	tc := tls.Client(tcp, cfg)
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, f.addr)
	if _, err := tc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade over TLS: %v %v", resp, err)
	}
	if br.Buffered() != 0 {
		t.Fatalf("%d bytes after the 101", br.Buffered())
	}
	suite := tc.ConnectionState().CipherSuite
	log.mu.Lock()
	cs, ss := log.m["CLIENT_TRAFFIC_SECRET_0"], log.m["SERVER_TRAFFIC_SECRET_0"]
	log.mu.Unlock()
	// The upgrade request was the client's one record under its
	// application key.
	out, err1 := tls13.NewKeys(suite, cs, 1)
	in, err2 := tls13.NewKeys(suite, ss, 0)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return &rawTLSClient{t: t, conn: tcp, rec: tls13.NewRecords(in, out)}
}

func (c *rawTLSClient) writeRaw(b []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// send seals b as application data.
func (c *rawTLSClient) send(b []byte) { c.writeRaw(c.rec.Seal(nil, tls13.RecordTypeData, b)) }

// sendText sends one masked text frame.
func (c *rawTLSClient) sendText(msg string) {
	c.send(frame(true, 1, []byte(msg), &[4]byte{9, 8, 7, 6}))
}

// fixInSeq finds the sequence number of edge's first record after the 101
// (edge's session tickets and the 101 came before it), by trial.
func (c *rawTLSClient) fixInSeq(rec []byte) {
	for seq := range uint64(8) {
		k := *c.rec.In()
		k.SetSeq(seq)
		if _, _, err := k.OpenRecord(append([]byte(nil), rec...)); err == nil {
			c.rec.In().SetSeq(seq)
			c.inSeqKnown = true
			return
		}
	}
	c.t.Fatal("edge's first record after the upgrade opens under no sequence number 0-7")
}

// read returns the next plaintext edge sent, or the error that ended the
// stream (io.EOF, a tls13.PeerAlert, a record error).
func (c *rawTLSClient) read() ([]byte, error) {
	buf := make([]byte, 64<<10)
	for {
		if len(c.pending) >= tls13.RecordHeaderLen {
			if !c.inSeqKnown {
				n := int(c.pending[3])<<8 | int(c.pending[4])
				if len(c.pending) >= tls13.RecordHeaderLen+n {
					c.fixInSeq(c.pending[:tls13.RecordHeaderLen+n])
				}
			}
			if c.inSeqKnown {
				b := append([]byte(nil), c.pending...)
				c.rec.SetPart(nil)
				n, err := c.rec.Open(b, 0)
				c.pending = c.rec.Part()
				if err != nil {
					return nil, err
				}
				if n > 0 || c.rec.PeerClosed() {
					if c.rec.PeerClosed() && n == 0 {
						return nil, io.EOF
					}
					return b[:n], nil
				}
			}
		}
		n, err := c.conn.Read(buf)
		c.pending = append(c.pending, buf[:n]...)
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// echo sends msg and expects its echo frame back.
func (c *rawTLSClient) echo(msg string) {
	c.t.Helper()
	c.sendText(msg)
	want := frame(true, 1, []byte(msg), nil)
	var got []byte
	for len(got) < len(want) {
		b, err := c.read()
		if err != nil {
			c.t.Fatalf("echo of %q: %v after %q", msg, err, got)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, want) {
		c.t.Fatalf("echo = %q, want %q", got, want)
	}
}

// A client's KeyUpdate with update_requested: the loop moves to the
// client's next key, answers with its own KeyUpdate before anything else,
// and seals the echo under its next key.
func TestTLSClientKeyUpdate(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-cku", "")
		c := f.rawClient(t, e, url)
		c.echo("before the key update")
		if got := e.relayedSockets("", "tls"); got != 1 {
			t.Fatalf("TLS sockets on the loops = %d, want 1", got)
		}
		for _, requested := range []byte{1, 0, 1} {
			edgeKey := append([]byte(nil), c.rec.In().Secret()...)
			c.writeRaw(c.rec.Out().SealRecord(nil, tls13.RecordTypeHandshake, []byte{tls13.MsgKeyUpdate, 0, 0, 1, requested}))
			if err := c.rec.Out().Update(); err != nil {
				t.Fatal(err)
			}
			c.echo(fmt.Sprintf("after a key update (requested %d)", requested))
			if moved := !bytes.Equal(edgeKey, c.rec.In().Secret()); moved != (requested == 1) {
				t.Errorf("update_requested=%d: edge's key moved = %v", requested, moved)
			}
		}
	})
}

// A client that breaks the record protocol loses its socket, with the
// alert that says why, and its call is released; a record cut short by
// the client's FIN just ends the socket.
func TestTLSBadRecordsEndTheSocket(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		cases := map[string]struct {
			send  func(c *rawTLSClient)
			alert byte // 0: none expected
		}{
			"corrupted": {func(c *rawTLSClient) {
				r := c.rec.Out().SealRecord(nil, tls13.RecordTypeData, frame(true, 1, []byte("hello"), &[4]byte{1, 2, 3, 4}))
				r[len(r)-3] ^= 0x40
				c.writeRaw(r)
			}, tls13.AlertBadRecordMAC},
			"oversized": {func(c *rawTLSClient) {
				n := tls13.MaxCiphertext + 1
				c.writeRaw(append([]byte{tls13.RecordTypeData, 3, 3, byte(n >> 8), byte(n)}, make([]byte, 100)...))
			}, tls13.AlertRecordOverflow},
			"unprotected": {func(c *rawTLSClient) {
				c.writeRaw([]byte{tls13.RecordTypeHandshake, 3, 3, 0, 5, tls13.MsgKeyUpdate, 0, 0, 1, 0})
			}, tls13.AlertUnexpectedMessage},
			"session ticket from the client": {func(c *rawTLSClient) {
				c.writeRaw(c.rec.Out().SealRecord(nil, tls13.RecordTypeHandshake, []byte{tls13.MsgNewSessionTicket, 0, 0, 0}))
			}, tls13.AlertUnexpectedMessage},
			"truncated": {func(c *rawTLSClient) {
				r := c.rec.Out().SealRecord(nil, tls13.RecordTypeData, frame(true, 1, []byte("hello"), &[4]byte{1, 2, 3, 4}))
				c.writeRaw(r[:len(r)/2])
				c.conn.(*net.TCPConn).CloseWrite()
			}, 0},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay})
				f := e.serveTLS(t)
				pod, url := e.allocate("CA-bad", "")
				c := f.rawClient(t, e, url)
				c.echo("fine so far")
				tc.send(c)
				var err error
				for err == nil {
					_, err = c.read()
				}
				var a tls13.PeerAlert
				switch {
				case tc.alert != 0 && (!errors.As(err, &a) || byte(a) != tc.alert):
					t.Errorf("client read %v, want alert %d", err, tc.alert)
				case tc.alert == 0 && err != io.EOF:
					t.Errorf("client read %v, want the end of the stream", err)
				}
				e.waitSockets(0)
				if owner := e.podOwner(pod); owner != "" {
					t.Errorf("pod %s still leased to %q", pod, owner)
				}
			})
		}
	})
}

// The client's close frame then close_notify: edge relays the close, the
// pod answers it, and edge ends with its own close_notify, then FIN.
func TestTLSClientCloseNotify(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-cn", "")
		c := f.rawClient(t, e, url)
		c.echo("hello")
		c.send(wsproto.CloseFrame(4001, "done", &[4]byte{1, 1, 1, 1}))
		c.writeRaw(c.rec.AlertRecord(tls13.AlertCloseNotify))
		var got []byte
		var err error
		for err == nil {
			var b []byte
			b, err = c.read()
			got = append(got, b...)
		}
		if err != io.EOF || !c.rec.PeerClosed() {
			t.Errorf("client's read ended with %v (close_notify from edge: %v), want close_notify", err, c.rec.PeerClosed())
		}
		if want := wsproto.CloseFrame(4001, "done", nil); len(got) > 0 && !bytes.Equal(got, want) {
			t.Errorf("client got % x, want the pod's close % x or nothing", got, want)
		}
		e.waitSockets(0)
		if got := value(e.px.metrics.closes.WithLabelValues("client", "4001")); got != 1 {
			t.Errorf("closes{client,4001} = %v, want 1", got)
		}
	})
}

// A client that asks for edge's KeyUpdate again and again while it does
// not read gets one answer before edge's next record, not one queued per
// request: what edge holds for a client stays bounded by the relay's
// backpressure whatever the client sends (RFC 8446 4.6.3 allows one answer
// to several requests). As many requests as the record layer takes in a
// row (more end the socket: TestTLSRecordFloodsEndTheSocket). The pod talks on its own and keeps reading, so the
// client's records keep reaching edge while its own side is stalled.
func TestTLSKeyUpdateRequestsWhileNotReadingGetOneAnswer(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = 5 * time.Minute }})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-kus", "")
		c := f.rawClient(t, e, url)
		c.conn.SetDeadline(time.Now().Add(2 * time.Minute))
		tcp := c.conn.(*net.TCPConn)
		records := &recordCounter{}
		c.conn = &countingConn{Conn: c.conn, rec: records}
		const messages, size = 2048, 32 << 10 // 64 MiB: far beyond the socket buffers
		c.sendText(fmt.Sprint(fakeagent.SpeakMessage, messages))
		waitUnreadStalled(t, tcp)
		const requests = tls13.KeyUpdateBurst
		for range requests {
			c.writeRaw(c.rec.Out().SealRecord(nil, tls13.RecordTypeHandshake, []byte{tls13.MsgKeyUpdate, 0, 0, 1, 1}))
			if err := c.rec.Out().Update(); err != nil {
				t.Fatal(err)
			}
		}
		// Now read all the pod said: the requests were all opened by edge
		// meanwhile (the client's key moved with each, so any lost one
		// would have broken the stream).
		got := 0
		for got < messages*size {
			b, err := c.read()
			if err != nil {
				t.Fatalf("after %d of %d bytes: %v", got, messages*size, err)
			}
			got += len(b)
		}
		// A KeyUpdate record is the only 27-byte one (every data record
		// here is a 32 KiB message's).
		if n := records.count(tls13.RecordHeaderLen + 5 + 1 + tls13.TagLen); n == 0 || n > 10 {
			t.Errorf("edge sent %d KeyUpdates for %d requests made while the client did not read; want one or a few", n, requests)
		}
	})
}

// waitUnreadStalled returns once what waits unread in c's receive queue
// stopped growing (unchanged for 500 ms): the sender is held by
// backpressure. A stall is the absence of an event, so this polls.
func waitUnreadStalled(t *testing.T, c *net.TCPConn) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	last, still := -1, 0
	for deadline := time.Now().Add(30 * time.Second); still < 10; {
		if time.Now().After(deadline) {
			t.Fatal("the client's receive queue never stopped growing")
		}
		time.Sleep(50 * time.Millisecond)
		var n int
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		if n == last && n > 0 {
			still++
		} else {
			last, still = n, 0
		}
	}
}
