package nodee2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// liveCall is a call whose media goes out on a clock, as a provider sends
// it, not in step with its echoes: a pod that dies holding messages loses
// them, and the echoes that follow show where the stream picked up. The
// opening (connected, start) is Twilio's, which edge replays to a pod it
// moves the call to.
type liveCall struct {
	Sid, Pod string
	hangUp   chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	echoes []echoed // media echoes, in arrival order
	hung   bool     // the caller hung up: a read error after it is the end
	err    string   // what went wrong, "" while the stream is as sent
	cut    bool     // the socket ended before the caller hung up
	code   int      // the close status edge sent when it ended the socket (-1: none)
}

// echoed is one media echo: its sequence number and when it came back.
type echoed struct {
	Seq int
	At  time.Time
}

func connectedMsg() string { return `{"event":"connected","protocol":"Call","version":"1.0.0"}` }

func startMsg(sid string) string {
	stream := "MZ" + sid[2:]
	return fmt.Sprintf(`{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC0","streamSid":%q,"callSid":%q},"streamSid":%q}`, stream, sid, stream)
}

func mediaMsg(seq int) string {
	return fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"payload":"AAAA"}}`, seq)
}

// dial places a call of merchant: the signed webhook, the media socket,
// then connected, start and a media message every 20 ms until end. Every
// message read must be the echo of one sent: the opening's first, then
// media with sequence numbers strictly increasing.
func (p *provider) dial(merchant string) (*liveCall, error) {
	lc := &liveCall{Sid: p.sid(), hangUp: make(chan struct{}), done: make(chan struct{}), code: -1}
	_, path, err := p.webhook(lc.Sid, merchant)
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(path, "/ws/pod/"); ok {
		lc.Pod, _, _ = strings.Cut(rest, "/")
	}
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, _, err := websocket.Dial(dctx, "ws://"+strings.TrimPrefix(p.public, "http://")+path, nil)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("media socket: %w", err)
	}
	// Bounds a call the test never ends; each scenario ends its own.
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer stop()
		lc.read(ctx, conn)
	}()
	go func() {
		defer wg.Done()
		lc.write(ctx, conn)
	}()
	go func() {
		wg.Wait()
		stop()
		conn.CloseNow()
		close(lc.done)
	}()
	return lc, nil
}

// write sends the opening, then media every 20 ms until the caller hangs
// up (close 1000) or the socket ends.
func (lc *liveCall) write(ctx context.Context, conn *websocket.Conn) {
	send := func(msg string) bool {
		if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			lc.fail(true, -1, "write: "+err.Error())
			return false
		}
		return true
	}
	if !send(connectedMsg()) || !send(startMsg(lc.Sid)) {
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seq := 2; ; seq++ {
		select {
		case <-lc.hangUp:
			lc.mu.Lock()
			lc.hung = true
			lc.mu.Unlock()
			conn.Close(websocket.StatusNormalClosure, "caller hung up")
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !send(mediaMsg(seq)) {
			return
		}
	}
}

// read checks every message against what was sent, in order, and times
// the media echoes.
func (lc *liveCall) read(ctx context.Context, conn *websocket.Conn) {
	want := []string{connectedMsg(), startMsg(lc.Sid)}
	last := 1
	for {
		_, got, err := conn.Read(ctx)
		if err != nil {
			lc.mu.Lock()
			hung := lc.hung
			lc.mu.Unlock()
			if !hung {
				lc.fail(true, int(websocket.CloseStatus(err)), "read: "+err.Error())
			}
			return
		}
		if len(want) > 0 {
			if string(got) != want[0] {
				lc.fail(false, -1, fmt.Sprintf("echo %q, want %q", got, want[0]))
				return
			}
			want = want[1:]
			continue
		}
		var m struct {
			Event    string `json:"event"`
			Sequence string `json:"sequenceNumber"`
		}
		seq, err := 0, errors.New("not a media message")
		if json.Unmarshal(got, &m) == nil && m.Event == "media" {
			seq, err = strconv.Atoi(m.Sequence)
		}
		switch {
		case err != nil:
			lc.fail(false, -1, fmt.Sprintf("echo %q after the opening: %v", got, err))
			return
		case seq <= last:
			lc.fail(false, -1, fmt.Sprintf("echo of media %d after media %d: out of order", seq, last))
			return
		case string(got) != mediaMsg(seq):
			lc.fail(false, -1, fmt.Sprintf("echo %q, want %q", got, mediaMsg(seq)))
			return
		}
		last = seq
		lc.mu.Lock()
		lc.echoes = append(lc.echoes, echoed{seq, time.Now()})
		lc.mu.Unlock()
	}
}

func (lc *liveCall) fail(cut bool, code int, err string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.err == "" {
		lc.err, lc.cut, lc.code = err, cut, code
	}
}

// over reports whether the stream went wrong or ended.
func (lc *liveCall) over() bool {
	select {
	case <-lc.done:
		return true
	default:
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.err != ""
}

// echoesFrom counts the media echoes of sequence number seq and after.
func (lc *liveCall) echoesFrom(seq int) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	n := 0
	for _, e := range lc.echoes {
		if e.Seq >= seq {
			n++
		}
	}
	return n
}

// end hangs up (once) and waits for the socket to close.
func (lc *liveCall) end() {
	select {
	case <-lc.hangUp:
	default:
		close(lc.hangUp)
	}
	<-lc.done
}

func (lc *liveCall) outcome() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.err == "" {
		return fmt.Sprintf("%d media echoes, as sent", len(lc.echoes))
	}
	return fmt.Sprintf("%s (cut %v, close code %d) after %d media echoes", lc.err, lc.cut, lc.code, len(lc.echoes))
}
