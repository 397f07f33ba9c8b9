package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// Records the loops' record layer handles without application data: a
// client can make edge decrypt them (and derive keys, for a KeyUpdate)
// as fast as it can send them.
var (
	recEmpty        = func(c *rawTLSClient) []byte { return c.rec.Out().SealRecord(nil, tls13.RecordTypeData, nil) }
	recUserCanceled = func(c *rawTLSClient) []byte {
		return c.rec.Out().SealRecord(nil, tls13.RecordTypeAlert, []byte{1, tls13.AlertUserCanceled})
	}
)

// recKeyUpdate seals the client's KeyUpdate and moves it to its next key.
func recKeyUpdate(requested byte) func(c *rawTLSClient) []byte {
	return func(c *rawTLSClient) []byte {
		r := c.rec.Out().SealRecord(nil, tls13.RecordTypeHandshake, []byte{tls13.MsgKeyUpdate, 0, 0, 1, requested})
		if err := c.rec.Out().Update(); err != nil {
			c.t.Fatal(err)
		}
		return r
	}
}

// A TLS client on the loops cannot make edge open records without end:
// as crypto/tls does, edge ends the socket (alert unexpected_message)
// after more than 16 records in a row that carry no application data
// (empty records, KeyUpdates, user_canceled warnings), and it also bounds
// the rate of KeyUpdates between data, which crypto/tls does not. The
// flood is the client's own end: its pod is not blamed. Up to 16 in a
// row, as crypto/tls accepts, the socket lives on.
func TestTLSRecordFloodsEndTheSocket(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		cases := map[string]struct {
			records func(c *rawTLSClient) [][]byte
			ends    bool
		}{
			"17 empty records": {func(c *rawTLSClient) [][]byte { return repeat(c, 17, recEmpty) }, true},
			"17 KeyUpdates":    {func(c *rawTLSClient) [][]byte { return repeat(c, 17, recKeyUpdate(1)) }, true},
			"17 warnings":      {func(c *rawTLSClient) [][]byte { return repeat(c, 17, recUserCanceled) }, true},
			"KeyUpdates between data": {func(c *rawTLSClient) [][]byte {
				var out [][]byte
				for i := range 200 {
					out = append(out, recKeyUpdate(byte(i%2))(c), c.rec.Out().SealRecord(nil, tls13.RecordTypeData,
						frame(true, 1, []byte(fmt.Sprint("k", i)), &[4]byte{1, 2, 3, 4})))
				}
				return out
			}, true},
			"16 of each": {func(c *rawTLSClient) [][]byte {
				return append(append(repeat(c, 16, recEmpty), c.rec.Out().SealRecord(nil, tls13.RecordTypeData,
					frame(true, 1, []byte("x"), &[4]byte{1, 2, 3, 4}))), repeat(c, 16, recKeyUpdate(1))...)
			}, false},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay, cfg: failoverCfg})
				f := e.serveTLS(t)
				pod := newStrictPod(t)
				e.addPod("pod-x", "gold", pod.addr)
				callID, url := e.callOn("pod-x")
				c := f.rawClient(t, e, url)
				c.conn.SetDeadline(time.Now().Add(5 * time.Second))
				c.echo("before")
				var wire []byte
				for _, r := range tc.records(c) {
					wire = append(wire, r...)
				}
				c.writeRaw(wire)
				if !tc.ends {
					c.expectText("x") // the pod's echo of the data among them
					c.echo("still open")
					return
				}
				var err error
				for err == nil {
					_, err = c.read()
				}
				var a tls13.PeerAlert
				if !errors.As(err, &a) || byte(a) != tls13.AlertUnexpectedMessage {
					t.Errorf("client read %v, want alert unexpected_message", err)
				}
				e.waitSockets(0)
				e.checkPodNotBlamed(t, callID, "pod-x")
			})
		}
	})
}

// expectText reads the text frame msg from edge.
func (c *rawTLSClient) expectText(msg string) {
	c.t.Helper()
	want := frame(true, 1, []byte(msg), nil)
	var got []byte
	for len(got) < len(want) {
		b, err := c.read()
		if err != nil {
			c.t.Fatalf("reading %q: %v after %q", msg, err, got)
		}
		got = append(got, b...)
	}
	if string(got) != string(want) {
		c.t.Fatalf("got %q, want %q", got, want)
	}
}

func repeat(c *rawTLSClient, n int, rec func(*rawTLSClient) []byte) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = rec(c)
	}
	return out
}

// The loops' record layer refuses every run of records without data that
// crypto/tls refuses (both allow 16 in a row, refuse 17), and more: the
// same records, sealed by one client, go to a crypto/tls server and to
// tls13.Records, then a data record, and whichever crypto/tls ends the
// connection for, edge must too.
func TestTLSRecordLimitsAtLeastCryptoTLS(t *testing.T) {
	type rec func(seal func(typ byte, content []byte))
	empty := func(seal func(byte, []byte)) { seal(tls13.RecordTypeData, nil) }
	warning := func(seal func(byte, []byte)) { seal(tls13.RecordTypeAlert, []byte{1, tls13.AlertUserCanceled}) }
	update := func(requested byte) rec {
		return func(seal func(byte, []byte)) {
			seal(tls13.RecordTypeHandshake, []byte{tls13.MsgKeyUpdate, 0, 0, 1, requested})
		}
	}
	data := func(seal func(byte, []byte)) { seal(tls13.RecordTypeData, []byte("d")) }
	times := func(n int, r ...rec) []rec {
		var out []rec
		for range n {
			out = append(out, r...)
		}
		return out
	}
	cases := map[string]struct {
		seq        []rec
		cryptoTLS  bool // whether crypto/tls refuses it
		edgeRefuse bool
	}{
		"16 empty":                   {times(16, empty), false, false},
		"17 empty":                   {times(17, empty), true, true},
		"16 KeyUpdates":              {times(16, update(0)), false, false},
		"17 KeyUpdates":              {times(17, update(0)), true, true},
		"17 requested KeyUpdates":    {times(17, update(1)), true, true},
		"16 warnings":                {times(16, warning), false, false},
		"17 warnings":                {times(17, warning), true, true},
		"8 empty, 9 KeyUpdates":      {append(times(8, empty), times(9, update(0))...), true, true},
		"16 empty, data, 16 empty":   {append(append(times(16, empty), data), times(16, empty)...), false, false},
		"40 KeyUpdates between data": {times(40, update(0), data), false, true},
	}
	ca := testpki.NewCA(t)
	pair := ca.Valid(t, "127.0.0.1")
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// crypto/tls, as a server on loopback.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			verdict := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					verdict <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				sc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
				buf := make([]byte, len("start")+len("end"))
				n := 0
				for n < len(buf) && err == nil {
					var k int
					k, err = sc.Read(buf[n:])
					n += k
				}
				verdict <- err
			}()
			tcp, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer tcp.Close()
			keys := &secretLog{m: map[string][]byte{}}
			cfg := ca.ClientConfig("127.0.0.1")
			cfg.KeyLogWriter = keys
			cc := tls.Client(tcp, cfg)
			if _, err := cc.Write([]byte("start")); err != nil {
				t.Fatal(err)
			}
			keys.mu.Lock()
			secret := keys.m["CLIENT_TRAFFIC_SECRET_0"]
			keys.mu.Unlock()
			suite := cc.ConnectionState().CipherSuite
			out, err := tls13.NewKeys(suite, secret, 1)
			if err != nil {
				t.Fatal(err)
			}
			// edge's record layer, keyed as the client's next record.
			in, _ := tls13.NewKeys(suite, secret, 1)
			edge := tls13.NewRecords(in, nil)
			var wire []byte
			seal := func(typ byte, content []byte) {
				wire = out.SealRecord(wire, typ, content)
				if typ == tls13.RecordTypeHandshake {
					out.Update()
				}
			}
			for _, r := range tc.seq {
				r(seal)
			}
			seal(tls13.RecordTypeData, []byte("end"))
			tcp.Write(wire)
			_, edgeErr := edge.Open(append([]byte(nil), wire...), 0)
			cryptoErr := <-verdict
			if (cryptoErr != nil) != tc.cryptoTLS {
				t.Errorf("crypto/tls: %v; want refused %v", cryptoErr, tc.cryptoTLS)
			}
			if (edgeErr != nil) != tc.edgeRefuse {
				t.Errorf("edge: %v; want refused %v", edgeErr, tc.edgeRefuse)
			}
			if cryptoErr != nil && edgeErr == nil {
				t.Errorf("crypto/tls refuses (%v) what edge accepts", cryptoErr)
			}
		})
	}
}
