package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// handoffRig is TLSListener on loopback behind an http.Server whose handler
// does what the proxy does with a TLS media socket, without a pod: hijack,
// write the 101, take the records over from crypto/tls (tls13.Take). What it
// took comes on got.
type handoffRig struct {
	addr   string
	client *tls.Config
	got    chan handoff
}

// handoff is one connection's hand-off, seen from edge.
type handoff struct {
	tc *tls.Conn
	// plain is what the pod would get first: the bytes the HTTP server
	// buffered behind the request, then what tls13.Take drained.
	plain []byte
	t     *tls13.Takeover // nil: crypto/tls keeps the connection
}

func newHandoffRig(tb testing.TB) *handoffRig {
	tb.Helper()
	ca := testpki.NewCA(tb)
	pair := ca.Valid(tb, "127.0.0.1")
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &handoffRig{addr: ln.Addr().String(), client: ca.ClientConfig("127.0.0.1"), got: make(chan handoff, 1)}
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		var h handoff
		if n := brw.Reader.Buffered(); n > 0 {
			b, _ := brw.Reader.Peek(n)
			h.plain = append(h.plain, b...)
		}
		h.tc = conn.(*tls.Conn)
		var held []byte
		h.t, held = tls13.Take(h.tc)
		h.plain = append(h.plain, held...)
		r.got <- h
	})}
	go srv.Serve(TLSListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{cert}}))
	tb.Cleanup(func() { srv.Close() })
	return r
}

// rigClient is a TLS 1.3 client of the rig that can also write records of
// its own under its application key (after the upgrade request, which
// crypto/tls seals as the key's first record).
type rigClient struct {
	tc  *tls.Conn
	tcp net.Conn
	out *tls13.Keys
	br  *bufio.Reader
}

func (r *handoffRig) dial(tb testing.TB) *rigClient {
	tb.Helper()
	tcp, err := net.Dial("tcp", r.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tcp.Close() })
	tcp.SetDeadline(time.Now().Add(10 * time.Second))
	keys := &secretLog{m: map[string][]byte{}}
	cfg := r.client.Clone()
	cfg.MinVersion, cfg.KeyLogWriter = tls.VersionTLS13, keys
	tc := tls.Client(tcp, cfg)
	if err := tc.Handshake(); err != nil {
		tb.Fatal(err)
	}
	keys.mu.Lock()
	secret := keys.m["CLIENT_TRAFFIC_SECRET_0"]
	keys.mu.Unlock()
	out, err := tls13.NewKeys(tc.ConnectionState().CipherSuite, secret, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return &rigClient{tc: tc, tcp: tcp, out: out, br: bufio.NewReader(tc)}
}

const rigRequest = "GET /ws HTTP/1.1\r\nHost: edge\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"

// read101 reads the rig's 101 through crypto/tls.
func (c *rigClient) read101(tb testing.TB) {
	tb.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("upgrade: %v %v", resp, err)
	}
}

// edgeReads returns the next n plaintext bytes edge reads from the client
// after h: h.plain, then records opened by the takeover's record layer (or
// crypto/tls, when it kept the connection); fewer, and the error, when the
// client's stream fails first.
func (h handoff) edgeReads(n int) ([]byte, error) {
	got := append([]byte(nil), h.plain...)
	if h.t == nil {
		rest := make([]byte, max(n-len(got), 0))
		k, err := io.ReadFull(h.tc, rest)
		return append(got, rest[:k]...), err
	}
	h.t.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	for len(got) < n {
		m := copy(buf, h.t.Records().Part())
		k, err := h.t.Conn().Read(buf[m:])
		if k > 0 {
			p, oerr := h.t.Records().Open(buf[:m+k], 0)
			got = append(got, buf[:p]...)
			if oerr != nil {
				return got, oerr
			}
		}
		if err != nil && len(got) < n {
			return got, err
		}
	}
	return got, nil
}

// overLimits reports whether ops, as FuzzTLSHandoff sends them, break the
// record limits of crypto/tls or edge (more than 16 records in a row
// without data, more KeyUpdates than edge's burst): either may then end
// the connection, before the upgrade's answer or after.
func overLimits(ops []byte) bool {
	run, updates := 0, 0
	for _, op := range ops {
		switch op % 6 {
		case 0:
			run++
			if int(op>>3)*37%3000 > 0 {
				run = 0
			}
		case 4:
			run = 0
		case 2, 5:
			updates++
			run++
		default:
			run++
		}
		if run > tls13.MaxUselessRecords || updates > tls13.KeyUpdateBurst {
			return true
		}
	}
	return false
}

// FuzzTLSHandoff: whatever a TLS 1.3 client pipelines behind its upgrade
// request (data records of any size, empty records, KeyUpdates, warning
// alerts), cut across TCP segments anywhere, the hand-off from crypto/tls
// gives edge the client's bytes exactly once and in order: the takeover's
// record layer opens what follows, or crypto/tls keeps the connection and
// reads it. A record sent after the 101 reaches edge too.
func FuzzTLSHandoff(f *testing.F) {
	f.Add([]byte{0}, []byte{})
	f.Add([]byte{0, 8, 16, 4}, []byte{7, 200})
	f.Add([]byte{2, 0}, []byte{3})
	f.Add([]byte{3, 0, 1, 1, 1}, []byte{1, 1, 1, 1, 1})
	f.Add(bytes.Repeat([]byte{1}, 20), []byte{})
	f.Add([]byte{4, 0, 4}, []byte{100, 5, 250})
	f.Add([]byte{5, 0, 13}, []byte{0, 0, 30})
	rig := newHandoffRig(f)
	f.Fuzz(func(t *testing.T, ops, cuts []byte) {
		if len(ops) > 24 {
			ops = ops[:24]
		}
		c := rig.dial(t)
		var wire, want []byte
		for i, op := range ops {
			switch op % 6 {
			case 0, 4:
				n := int(op>>3) * 37 % 3000
				if op%6 == 4 {
					n = 10000 + int(op)
				}
				p := bytes.Repeat([]byte{byte('a' + i%26)}, n)
				want = append(want, p...)
				for len(p) > 0 {
					k := min(len(p), tls13.MaxPlaintext)
					wire = c.out.SealRecord(wire, tls13.RecordTypeData, p[:k])
					p = p[k:]
				}
			case 1:
				wire = c.out.SealRecord(wire, tls13.RecordTypeData, nil)
			case 2, 5:
				wire = c.out.SealRecord(wire, tls13.RecordTypeHandshake, []byte{tls13.MsgKeyUpdate, 0, 0, 1, op % 6 / 5})
				if err := c.out.Update(); err != nil {
					t.Fatal(err)
				}
			case 3:
				wire = c.out.SealRecord(wire, tls13.RecordTypeAlert, []byte{1, tls13.AlertUserCanceled})
			}
		}
		if _, err := c.tc.Write([]byte(rigRequest)); err != nil {
			t.Fatal(err)
		}
		for _, cut := range cuts {
			k := min(int(cut)*7, len(wire))
			c.tcp.Write(wire[:k])
			wire = wire[k:]
		}
		c.tcp.Write(wire)
		var h handoff
		select {
		case h = <-rig.got:
		case <-time.After(10 * time.Second):
			t.Fatal("no hand-off")
		}
		limited := overLimits(ops)
		if resp, err := http.ReadResponse(c.br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			if !limited {
				t.Fatalf("upgrade: %v %v", resp, err)
			}
		}
		// A record after the 101, as a client that waits for it sends.
		after := []byte("after the upgrade")
		c.tcp.Write(c.out.SealRecord(nil, tls13.RecordTypeData, after))
		want = append(want, after...)
		got, err := h.edgeReads(len(want))
		switch {
		case !bytes.HasPrefix(want, got):
			t.Fatalf("edge read %d bytes (taken over: %v) that are not what the client sent: %s", len(got), h.t != nil, firstDiff(got, want))
		case err != nil && !limited:
			t.Fatalf("edge read %d of %d bytes (taken over: %v): %v", len(got), len(want), h.t != nil, err)
		case err == nil && len(got) != len(want):
			t.Fatalf("edge read %d bytes, want %d", len(got), len(want))
		}
	})
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	return "one is a prefix of the other"
}

// Once edge has taken a connection's records over, crypto/tls writes
// nothing more on it, whoever still holds the tls.Conn: a record of its own
// (sealed under a sequence number the loop also uses) or its close_notify
// would break the stream the loop writes. The client, crypto/tls itself,
// reads exactly what the loop sent: its message, its close_notify, the end.
func TestTLSCryptoTLSWritesNothingAfterTheHandoff(t *testing.T) {
	rig := newHandoffRig(t)
	c := rig.dial(t)
	if _, err := c.tc.Write([]byte(rigRequest)); err != nil {
		t.Fatal(err)
	}
	h := <-rig.got
	c.read101(t)
	if h.t == nil {
		t.Fatal("no takeover")
	}
	// Anyone still holding the tls.Conn, before the loop detaches the
	// socket or after: crypto/tls must not reach the wire.
	h.tc.Write([]byte("from crypto/tls after the hand-off"))
	fd, err := dupFD(h.t.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	h.tc.Write([]byte("and again"))
	h.tc.Close()
	// The loop's part.
	wire := h.t.Records().Seal(nil, tls13.RecordTypeData, []byte("from the loop"))
	wire = append(wire, h.t.Records().AlertRecord(tls13.AlertCloseNotify)...)
	if n, errno := relay.RawWrite(fd, wire); n != len(wire) {
		t.Fatalf("loop's write: %d of %d bytes, %v", n, len(wire), errno)
	}
	unix.Shutdown(fd, unix.SHUT_WR)
	got, err := io.ReadAll(c.br)
	if string(got) != "from the loop" || err != nil {
		t.Errorf("client read %q, %v; want only the loop's message, then close_notify", got, err)
	}
}

// dupFD takes c's socket the way the loops do: a non-blocking duplicate
// of its fd, then the Go conn's close.
func dupFD(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	c.Close()
	return fd, nil
}
