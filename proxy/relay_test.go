package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// checkCarried fails unless the relay asked for carried the sockets (the
// loops fall back to goroutines, and the uring relay to the epoll loops,
// with no more than a log line).
func (e *env) checkCarried(t *testing.T, relay Relay, want int64) {
	t.Helper()
	if relay == relayGoroutines {
		want = 0
	}
	// The client's dial returns once the 101 is written; the socket goes to
	// a loop just after. The hand-over has no event to await, so this polls
	// briefly (an epoll relay that fell back never gets there).
	testwait.Until(t, 5*time.Second, fmt.Sprintf("%d sockets on the loops", want), func() bool { return e.relayedSockets("", "") >= want })
	if got := e.relayedSockets("", ""); got != want {
		t.Errorf("sockets on the loops = %d, want %d", got, want)
	}
	if relay != relayUring {
		want = 0
	}
	if got := e.relayedSockets(relayUring, ""); got != want {
		t.Errorf("sockets on the uring loops = %d, want %d", got, want)
	}
}

// A client that stops reading stalls the pod (the echo blocks), which
// stalls the client's own writes: nothing queues without bound in edge.
// Once the client reads again every message arrives, in order.
func TestSlowReaderBackpressure(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		// Moving 128 MiB under the race detector on a busy machine can leave
		// the client silent for longer than the usual test idle timeout.
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = 5 * time.Minute }})
		_, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		c.SetReadLimit(1 << 20)

		f := floodUntilStalled(t, c)
		f.readAll(t)
		echo(t, c, "after the flood")
		// Not right after the dial: the 101 reaches the client before
		// the socket is handed to a loop.
		e.checkCarried(t, relay, 1)
	})
}

// flood is a client writing 128 MiB of numbered 32 KiB messages without
// reading: far beyond every socket buffer on the way through edge.
type flood struct {
	c     *websocket.Conn
	wrote chan error
}

const floodMsgSize, floodCount = 32 << 10, 4096

// floodUntilStalled starts the flood on c and returns once its writes
// stalled (no progress for 500 ms): edge relays no faster than the client
// reads. It fails the test if every message went out unread.
func floodUntilStalled(t *testing.T, c *websocket.Conn) *flood {
	t.Helper()
	c.SetReadLimit(1 << 20)
	f := &flood{c: c, wrote: make(chan error, 1)}
	var written atomic.Int64
	go func() {
		msg := make([]byte, floodMsgSize)
		for i := range floodCount {
			binary.BigEndian.PutUint64(msg, uint64(i))
			if err := c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
				f.wrote <- err
				return
			}
			written.Add(floodMsgSize)
		}
		f.wrote <- nil
	}()
	// A stall is the absence of an event, so this polls.
	last, still := int64(-1), 0
	for still < 10 {
		select {
		case err := <-f.wrote:
			t.Fatalf("the client wrote all %d MiB without reading (err %v): something buffers without bound", floodCount*floodMsgSize>>20, err)
		case <-time.After(50 * time.Millisecond):
		}
		if n := written.Load(); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	t.Logf("client stalled after %d KiB written and none read (socket buffers on the way)", last>>10)
	return f
}

// readAll reads every message of the flood back, in order, and waits for
// its writer.
func (f *flood) readAll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range floodCount {
		_, got, err := f.c.Read(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if seq := binary.BigEndian.Uint64(got); seq != uint64(i) || len(got) != floodMsgSize {
			t.Fatalf("message %d: seq %d, %d bytes", i, seq, len(got))
		}
	}
	if err := <-f.wrote; err != nil {
		t.Fatal(err)
	}
}

// The pod hanging up, with a close frame or by dropping TCP, ends the
// client's socket and releases the call; a pod that drops TCP without a
// close frame died, and the client reads closeBadGateway, not a bare TCP
// close.
func TestPodHangsUp(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for name, tc := range map[string]struct {
			code       int
			wantClient int
			initiator  string
			wantCode   string
		}{
			"close frame": {4321, 4321, "pod", "4321"},
			"tcp drop":    {0, closeBadGateway, "edge", "1014"},
		} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, envOpt{relay: relay})
				pod, url := e.allocate("CA1", "")
				c := e.mustDial(url)
				echo(t, c, "hello")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := c.Write(ctx, websocket.MessageText, []byte(fmt.Sprint(fakeagent.CloseMessage, tc.code))); err != nil {
					t.Fatal(err)
				}
				got := readClose(t, c)
				if int(got) != tc.wantClient {
					t.Errorf("client saw close %d, want %d", got, tc.wantClient)
				}
				e.waitSockets(0)
				if owner := e.podOwner(pod); owner != "" {
					t.Errorf("pod %s still leased to %q after the pod hung up", pod, owner)
				}
				if v := value(e.px.metrics.closes.WithLabelValues(tc.initiator, tc.wantCode)); v != 1 {
					t.Errorf("closes{%s,%s} = %v, want 1", tc.initiator, tc.wantCode, v)
				}
				e.checkCarried(t, relay, 1)
			})
		}
	})
}

// A half-open client (gone without a FIN, or just mute) is found by the
// idle timeout: the socket closes with 4000 to both sides and the call is
// released. The client here is a raw TCP connection that completes the
// handshake, sends one frame and then neither sends nor closes.
func TestHalfOpenClientFoundByIdleTimeout(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		const idle = 300 * time.Millisecond
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = idle }})
		pod, url := e.allocate("CA1", "")
		conn, br := rawDial(t, url, nil)
		start := time.Now()
		// One masked text frame "hi" (RFC 6455 5.2), echoed unmasked.
		conn.Write([]byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2})
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		all, err := io.ReadAll(br)
		if err != nil {
			t.Fatalf("read until edge closed: %v", err)
		}
		if d := time.Since(start); d < idle || d > 5*time.Second {
			t.Errorf("silent client closed after %v, want about %v", d, idle)
		}
		want := append([]byte{0x81, 2, 'h', 'i'}, wsproto.CloseFrame(closeIdleTimeout, "idle timeout", nil)...)
		if string(all) != string(want) {
			t.Errorf("client got % x, want the echo then close 4000: % x", all, want)
		}
		e.waitSockets(0)
		if _, err := e.alloc.Call(context.Background(), "CA1"); !errors.Is(err, allocator.ErrCallNotFound) {
			t.Errorf("call of a silent socket not released: %v", err)
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod %s still leased to %q", pod, owner)
		}
		e.checkCarried(t, relay, 1)
	})
}

// rawDial opens a media socket by hand, with early written in the same
// write as the handshake, and returns the connection after the 101.
func rawDial(t *testing.T, wsURL string, early []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	hostPath := strings.TrimPrefix(wsURL, "ws://")
	host, path, _ := strings.Cut(hostPath, "/")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := fmt.Sprintf("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path, host)
	if _, err := conn.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %s", resp.Status)
	}
	return conn, br
}

// A frame over the limit that follows the handshake in the same packet
// (the relay gets it as early bytes, before its first read) ends the
// socket with 1009 at once: the client is mid-frame, so it gets nothing
// more toward the pod, and the client, between frames, gets the close.
func TestOversizedFrameBehindHandshake(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.MaxMessageBytes = 1024 }})
		pod, url := e.allocate("CA1", "")
		// The header of a 2 KiB masked binary frame and a little of its
		// payload; the rest never comes, and the pod (whose own limit is
		// higher) waits for it.
		early := frame(true, 2, make([]byte, 2048), &[4]byte{1, 2, 3, 4})[:200]
		conn, br := rawDial(t, url, early)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		all, err := io.ReadAll(br)
		if err != nil {
			t.Fatalf("read until edge closed: %v", err)
		}
		if want := wsproto.CloseFrame(closeTooBig, "message too big", nil); string(all) != string(want) {
			t.Errorf("client got % x, want close 1009: % x", all, want)
		}
		e.waitSockets(0)
		if got := value(e.px.metrics.closes.WithLabelValues("edge", "1009")); got != 1 {
			t.Errorf("closes{edge,1009} = %v, want 1", got)
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod %s still leased to %q", pod, owner)
		}
		e.checkCarried(t, relay, 1)
	})
}

// A socket stalled both ways (the client stopped reading, so the pod's
// echo blocks and the pod stops reading the client's flood) still ends
// when edge stops it: a drain deadline must not wait on writes that never
// complete, and the call is released.
func TestStopEndsStalledSocket(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) {
			c.IdleTimeout = 5 * time.Minute
			c.DrainTimeout = 100 * time.Millisecond
		}})
		pod, url := e.allocate("CA1", "")
		c := e.mustDial(url)
		var written atomic.Int64
		go func() {
			msg := make([]byte, 32<<10)
			for {
				if err := c.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
					return
				}
				written.Add(1)
			}
		}()
		last, still := int64(-1), 0
		for still < 10 {
			time.Sleep(50 * time.Millisecond)
			if n := written.Load(); n == last {
				still++
			} else {
				last, still = n, 0
			}
		}
		e.cancel()
		select {
		case <-e.runErr:
			e.runErr <- nil
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return: a stalled socket outlived the drain deadline")
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod %s still leased to %q", pod, owner)
		}
		e.checkCarried(t, relay, 1)
	})
}

func TestCodeLabelIsBounded(t *testing.T) {
	for code, want := range map[int]string{
		1000: "1000", 1011: "1011", 4000: "4000", 4999: "4999",
		3001: "3xxx", 999: "invalid", 1016: "invalid", 2000: "invalid", 5000: "invalid", 65535: "invalid",
	} {
		if got := codeLabel(code); got != want {
			t.Errorf("codeLabel(%d) = %q, want %q", code, got, want)
		}
	}
}
