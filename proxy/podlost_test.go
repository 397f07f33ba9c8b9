package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/testwait"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// rawPod is a pod that completes the WebSocket upgrade by hand and then
// misbehaves as kind says: "reset" resets the connection after the first
// bytes from the client (killed mid-call), "hang" never reads again,
// "close, then reset" sends a close frame (1000) and resets the connection
// once the client's first bytes (its echo) come, "bare after the client's
// close" ends its connection without a close frame once the client's
// first bytes (its close frame) come.
func rawPod(t *testing.T, kind string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					c.Close()
					return
				}
				c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
					wsproto.AcceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"))
				switch kind {
				case "reset":
					br.ReadByte()
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				case "close, then reset":
					c.Write(frame(true, 8, []byte{0x03, 0xe8}, nil))
					br.ReadByte()
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				case "bare after the client's close":
					br.ReadByte()
					c.Close()
				}
				// hang: neither read nor answer; closed at cleanup.
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A pod that dies mid-call (killed: a reset) or hangs (stops reading while
// the client reads) ends the client's socket with 1014 at once, releases
// the call and counts toward the pod's ejection.
func TestPodLostMidCall(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for _, kind := range []string{"reset", "hang"} {
			t.Run(kind, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) {
					failoverCfg(c)
					c.PodWriteTimeout = 300 * time.Millisecond
				}})
				e.addPod("pod-x", "gold", rawPod(t, kind))
				callID, url := e.callOn("pod-x")
				c := e.mustDial(url)
				go func() {
					msg := make([]byte, 16<<10)
					for {
						if err := c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
							return
						}
					}
				}()
				start := time.Now()
				if got := readClose(t, c); got != closeBadGateway {
					t.Errorf("client saw close %d, want %d", got, closeBadGateway)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("pod loss noticed after %v", d)
				}
				e.waitSockets(0)
				if _, err := e.alloc.Call(context.Background(), callID); err == nil {
					t.Error("call not released")
				}
				// The call's record says its pod was lost.
				if tl, err := e.alloc.Timeline(context.Background(), callID); err != nil || tl.SocketEnd != "pod_lost" {
					t.Errorf("timeline = %+v, %v; want pod_lost", tl, err)
				}
				testwait.Until(t, 10*time.Second, "the pod ejected", func() bool {
					pi, _ := e.alloc.PodInfo(context.Background(), "pod-x")
					return pi.Ejection != nil && pi.Ejection.Reason == "lost"
				})
			})
		}
	})
}

// A pod whose connection ends as part of a close is not lost: after its
// own close frame (it resets once the client answered it) or after the
// client's close frame (it ends its stream without answering). On every
// relay the call's record names the side that closed first, and the pod
// is neither recorded as pod_lost nor ejected.
func TestPodsEndWithinACloseIsNotLost(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for kind, want := range map[string]string{
			"close, then reset":             "pod",
			"bare after the client's close": "client",
		} {
			t.Run(kind, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay, cfg: failoverCfg})
				e.addPod("pod-x", "gold", rawPod(t, kind))
				callID, url := e.callOn("pod-x")
				m := dialMedia(t, e, nil, "plain", url, nil)
				podClose := frame(true, 8, []byte{0x03, 0xe8}, nil)
				if want == "pod" {
					got := make([]byte, len(podClose))
					if _, err := io.ReadFull(m.br, got); err != nil || !bytes.Equal(got, podClose) {
						t.Fatalf("client read % x, %v; want the pod's close % x", got, err, podClose)
					}
				}
				if _, err := m.Write(frame(true, 8, []byte{0x03, 0xe8}, &[4]byte{1, 2, 3, 4})); err != nil {
					t.Fatal(err)
				}
				m.drain()
				m.Close()
				e.waitSockets(0)
				tl, err := e.alloc.Timeline(context.Background(), callID)
				if err != nil || tl.ClosedBy != want || tl.CloseCode != "1000" {
					t.Errorf("the call's record: closed by %q with %q (%s), %v; want %s with 1000", tl.ClosedBy, tl.CloseCode, tl.SocketEnd, err, want)
				}
				e.checkPodNotBlamed(t, callID, "pod-x")
			})
		}
	})
}
