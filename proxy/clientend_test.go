package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Client transports of the media tests: plain TCP, TLS 1.3 (the event
// loops carry its records on the epoll and uring relays) and TLS 1.2
// (crypto/tls on the goroutine relay whatever proxy.relay says).
var transports = []string{"plain", "tls13", "tls12"}

// mediaConn is a client's media socket after the upgrade: frames go to
// Conn (the TCP connection or the tls.Conn over it), tcp is the TCP
// connection under it.
type mediaConn struct {
	net.Conn
	tcp *net.TCPConn
	br  *bufio.Reader
}

// dialMedia opens url's media socket by hand over transport, with early
// written right behind the upgrade request. f serves the TLS transports.
func dialMedia(t *testing.T, e *env, f *tlsFront, transport, url string, early []byte) *mediaConn {
	t.Helper()
	addr := strings.TrimPrefix(e.base(), "ws://")
	if transport != "plain" {
		addr = f.addr
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(20 * time.Second))
	m := &mediaConn{Conn: raw, tcp: raw.(*net.TCPConn)}
	if transport != "plain" {
		cfg := f.client.Clone()
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
		if transport == "tls12" {
			cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		}
		m.Conn = tls.Client(raw, cfg)
	}
	path := url[len(e.base()):]
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, addr)
	if _, err := m.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	m.br = bufio.NewReader(m.Conn)
	resp, err := http.ReadResponse(m.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade over %s: %s", transport, resp.Status)
	}
	return m
}

// echo sends msg as one masked text frame and expects its echo.
func (m *mediaConn) echo(t *testing.T, msg string) {
	t.Helper()
	if _, err := m.Write(frame(true, 1, []byte(msg), &[4]byte{3, 1, 4, 1})); err != nil {
		t.Fatalf("write: %v", err)
	}
	want := frame(true, 1, []byte(msg), nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(m.br, got); err != nil || string(got) != string(want) {
		t.Fatalf("echo of %q: % x, %v", msg, got, err)
	}
}

// drain reads what edge still sends until the stream ends, and returns it.
func (m *mediaConn) drain() []byte {
	all, _ := io.ReadAll(m.br)
	return all
}

// clientEnds are the ways a client leaves a media socket other than a
// close frame; the TLS transports add their own. Each returns once the
// client is done (its connection closed).
var clientEnds = map[string]func(m *mediaConn){
	// The TCP stream ends (for TLS without close_notify: a truncation).
	"fin": func(m *mediaConn) {
		m.tcp.CloseWrite()
		m.drain()
	},
	"reset": func(m *mediaConn) {
		m.tcp.SetLinger(0)
		m.tcp.Close()
	},
	// Bytes that are not WebSocket frames (an unmasked frame with a
	// reserved bit and opcode), inside the transport.
	"garbage": func(m *mediaConn) {
		m.Write([]byte("GET /again HTTP/1.1\r\n\r\n"))
		m.drain()
	},
}

var tlsClientEnds = map[string]func(m *mediaConn){
	"close_notify": func(m *mediaConn) {
		m.Conn.(*tls.Conn).CloseWrite()
		m.tcp.CloseWrite()
		m.drain()
	},
	// Bytes that are not a TLS record, under the TLS layer.
	"bad record": func(m *mediaConn) {
		m.tcp.Write([]byte("GET /again HTTP/1.1\r\n\r\n"))
		m.drain()
	},
}

// A client that leaves without a close frame (its stream ends, it resets,
// it sends garbage, and for TLS close_notify or a broken record) is the
// client's end, not its pod's: on every relay and client transport the
// call's record says so (not pod_lost), the pod is not ejected and the
// next call is given it. Only evidence from the pod's side may eject a
// pod: a media URL's holder must not be able to take pods out of
// allocation on every replica. The pod here is as strict as a server may
// be (it resets on garbage, closes bare when the client's stream ends).
func TestClientEndNeverBlamesThePod(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for _, transport := range transports {
			ends := clientEnds
			if transport != "plain" {
				ends = map[string]func(m *mediaConn){}
				for k, v := range clientEnds {
					ends[k] = v
				}
				for k, v := range tlsClientEnds {
					ends[k] = v
				}
			}
			for name, end := range ends {
				t.Run(transport+"/"+name, func(t *testing.T) {
					e := newEnv(t, envOpt{relay: relay, cfg: failoverCfg})
					f := e.serveTLS(t)
					pod := newStrictPod(t)
					e.addPod("pod-x", "gold", pod.addr)
					callID, url := e.callOn("pod-x")
					m := dialMedia(t, e, f, transport, url, nil)
					m.echo(t, "hello")
					e.checkTransportCarried(t, relay, transport)
					end(m)
					e.waitSockets(0)
					e.checkPodNotBlamed(t, callID, "pod-x")
				})
			}
		}
	})
}

// checkTransportCarried fails unless the relay expected for transport
// carried the socket: the loops take plain and TLS 1.3 clients, crypto/tls
// on goroutines TLS 1.2 ones.
func (e *env) checkTransportCarried(t *testing.T, relay Relay, transport string) {
	t.Helper()
	switch {
	case transport == "tls12":
		e.checkCarried(t, relayGoroutines, 0)
	default:
		e.checkCarried(t, relay, 1)
	}
	want := int64(0)
	if transport == "tls13" && relay != relayGoroutines {
		want = 1
	}
	if got := e.relayedSockets("", "tls"); got != want {
		t.Errorf("TLS sockets on the loops = %d, want %d", got, want)
	}
}

// checkPodNotBlamed fails unless callID's socket ended as anything but
// pod_lost, pod is not ejected, and a new call is given pod (the only free
// gold pod, see callOn).
func (e *env) checkPodNotBlamed(t *testing.T, callID, pod string) {
	t.Helper()
	ctx := context.Background()
	if tl, err := e.alloc.Timeline(ctx, callID); err != nil || tl.SocketEnd == "pod_lost" || tl.SocketEnd == "" {
		t.Errorf("the call's record: socket_end %q, %v; want the client's end, not pod_lost", tl.SocketEnd, err)
	}
	if pi, err := e.alloc.PodInfo(ctx, pod); err != nil || pi.Ejection != nil {
		t.Errorf("pod %s: ejection %+v, %v; want none", pod, pi.Ejection, err)
	}
	if al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA-next-" + callID}); err != nil || al.PodName != pod {
		t.Errorf("next call got %+v, %v; want pod %s", al, err, pod)
	}
	if got := value(e.px.metrics.ejections.WithLabelValues("lost")); got != 0 {
		t.Errorf("ejections{lost} = %v, want 0", got)
	}
}

// proxy.max_message_bytes bounds a whole message, however many frames it
// comes in: on every relay and client transport, a message sent as
// fragments each under the limit but over it together ends the socket
// with 1009 to the client, and the pod gets a close frame, never the
// message. A fragmented message within the limit goes through whole.
func TestFragmentedMessageOverTheLimit(t *testing.T) {
	const limit = 4096
	eachRelay(t, func(t *testing.T, relay Relay) {
		for _, transport := range transports {
			t.Run(transport, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) {
					failoverCfg(c)
					c.MaxMessageBytes = limit
				}})
				f := e.serveTLS(t)
				pod := newStrictPod(t)
				e.addPod("pod-x", "gold", pod.addr)
				callID, url := e.callOn("pod-x")
				m := dialMedia(t, e, f, transport, url, nil)
				mask := &[4]byte{7, 7, 7, 7}
				fragments := func(size int) []byte {
					p := make([]byte, size)
					for i := range p {
						p[i] = byte('a' + i%26)
					}
					return append(append(frame(false, 2, p, mask), frame(false, 0, p, mask)...), frame(true, 0, p, mask)...)
				}
				// 3 x 1000 bytes: one message of 3000, echoed whole.
				m.Write(fragments(1000))
				want := make([]byte, 0, 3000)
				for range 3 {
					for i := range 1000 {
						want = append(want, byte('a'+i%26))
					}
				}
				got := make([]byte, len(frame(true, 2, want, nil)))
				if _, err := io.ReadFull(m.br, got); err != nil || string(got) != string(frame(true, 2, want, nil)) {
					t.Fatalf("echo of a fragmented message within the limit: %d bytes, %v", len(got), err)
				}
				// 3 x (limit - 16): each fragment fits, the message does not.
				m.Write(fragments(limit - 16))
				all := m.drain()
				if want := wsproto.CloseFrame(closeTooBig, "message too big", nil); string(all) != string(want) {
					t.Errorf("client got % x, want close 1009 only", all[:min(len(all), 64)])
				}
				end := pod.next(t)
				for _, n := range end.msgs {
					if n > limit {
						t.Errorf("the pod got a message of %d bytes, over the limit %d", n, limit)
					}
				}
				if end.close != closeTooBig {
					t.Errorf("the pod's connection ended with %q, close %d; want edge's close 1009", end.how, end.close)
				}
				m.Close()
				e.waitSockets(0)
				e.checkPodNotBlamed(t, callID, "pod-x")
			})
		}
	})
}

// A TLS 1.2 client that tries to renegotiate (OpenSSL's s_client "R"),
// which crypto/tls refuses, ends its own socket: on every relay (TLS 1.2
// is crypto/tls's on the goroutine relay) the pod is not blamed.
func TestTLS12RenegotiationNeverBlamesThePod(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl not installed (make deps installs it)")
	}
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: failoverCfg})
		f := e.serveTLS(t)
		pod := newStrictPod(t)
		e.addPod("pod-x", "gold", pod.addr)
		callID, url := e.callOn("pod-x")
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(caFile, f.caPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("openssl", "s_client", "-connect", f.addr, "-tls1_2", "-CAfile", caFile,
			"-verify_ip", "127.0.0.1", "-verify_return_error", "-quiet", "-no_ign_eof")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
		defer timer.Stop()
		out := bufio.NewReader(stdout)
		fmt.Fprintf(stdin, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", f.wss(e, url)[len(f.base):], f.addr)
		resp, err := http.ReadResponse(out, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %v %v; openssl: %s", resp, err, stderr.String())
		}
		// A zero mask and hex digits: no read of s_client's stdin may
		// start with one of its command letters.
		stdin.Write(frame(true, 2, []byte("0123456789"), &[4]byte{}))
		want := frame(true, 2, []byte("0123456789"), nil)
		got := make([]byte, len(want))
		if _, err := io.ReadFull(out, got); err != nil || string(got) != string(want) {
			t.Fatalf("echo: % x, %v (openssl: %s)", got, err, stderr.String())
		}
		io.WriteString(stdin, "R\n")
		io.Copy(io.Discard, out) // until s_client's connection ends
		e.waitSockets(0)
		if !strings.Contains(stderr.String(), "RENEGOTIATING") {
			t.Errorf("openssl did not renegotiate: %s", stderr.String())
		}
		e.checkPodNotBlamed(t, callID, "pod-x")
	})
}
