package proxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// strictPod is a voice agent as strict as RFC 6455 lets a server be: it
// echoes each message whole (one frame), answers a close frame with its
// own, and fails the connection without a close frame (a bare TCP close,
// RFC 6455 7.1.7 makes the close frame a SHOULD) on a protocol error or
// when the client's stream ends without one. What each connection got is
// reported on ends when it is over.
type strictPod struct {
	addr string
	ends chan podEnd
}

// podEnd is one connection of a strictPod, seen from the pod.
type podEnd struct {
	msgs  []int // lengths of the whole messages received
	close int   // the client's close code (0: none; 1005: no code)
	how   string
}

func newStrictPod(t testing.TB) *strictPod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &strictPod{addr: ln.Addr().String(), ends: make(chan podEnd, 64)}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				end := p.serve(c)
				select {
				case p.ends <- end:
				default:
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// next is the next connection's end.
func (p *strictPod) next(t *testing.T) podEnd {
	t.Helper()
	select {
	case e := <-p.ends:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the pod's connection did not end")
	}
	return podEnd{}
}

func (p *strictPod) serve(c net.Conn) (end podEnd) {
	fail := func(how string) podEnd {
		// No close frame: the reset a strict server may send.
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		end.how = how
		return end
	}
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		c.Close()
		end.how = "no upgrade"
		return end
	}
	c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		wsproto.AcceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"))
	var msg []byte
	var opcode byte
	inMsg := false
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return fail("eof")
		}
		fin, rsv, op, masked := h[0]&0x80 != 0, h[0]&0x70, h[0]&0x0f, h[1]&0x80 != 0
		n := uint64(h[1] & 0x7f)
		var ext [8]byte
		switch n {
		case 126:
			if _, err := io.ReadFull(br, ext[:2]); err != nil {
				return fail("eof")
			}
			n = uint64(binary.BigEndian.Uint16(ext[:2]))
		case 127:
			if _, err := io.ReadFull(br, ext[:]); err != nil {
				return fail("eof")
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		control := op >= 8
		switch {
		case !masked, rsv != 0, op > 2 && op < 8, op > 10,
			control && (!fin || n > 125),
			op == 0 && !inMsg, (op == 1 || op == 2) && inMsg,
			n > 64<<20:
			return fail("protocol error")
		}
		var key [4]byte
		if _, err := io.ReadFull(br, key[:]); err != nil {
			return fail("eof")
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return fail("eof")
		}
		for i := range payload {
			payload[i] ^= key[i%4]
		}
		switch {
		case op == 8:
			end.close = 1005
			if len(payload) >= 2 {
				end.close = int(binary.BigEndian.Uint16(payload))
				c.Write(wsproto.CloseFrame(end.close, "", nil))
			} else {
				c.Write([]byte{0x88, 0})
			}
			c.Close()
			end.how = "close"
			return end
		case op == 9:
			c.Write(frame(true, 10, payload, nil))
		case op == 10:
		default:
			if op != 0 {
				opcode = op
			}
			msg = append(msg, payload...)
			inMsg = !fin
			if fin {
				end.msgs = append(end.msgs, len(msg))
				c.Write(frame(true, opcode, msg, nil))
				msg = nil
			}
		}
	}
}
