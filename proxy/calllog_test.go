package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// lockedBuf is a log sink the relay's goroutines may write concurrently.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON log records written so far.
func (l *lockedBuf) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if ln == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

// One call's media leaves two lines at info, whatever it carries: the
// socket opened and the socket closed (who, code, duration, messages and
// bytes each way, how the call was released), each naming the call, its
// merchant, provider and pod. Nothing per message. The release hands the
// socket's counts to the call's record (its timeline).
func TestSocketLogsOneLineAtOpenAndOneAtClose(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		sink := &lockedBuf{}
		log := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
		e := newEnv(t, envOpt{relay: relay, log: log})
		ctx := context.Background()
		al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA-log", MerchantID: "m1", Creator: "provider:twilio"})
		if err != nil {
			t.Fatal(err)
		}
		c := e.mustDial(e.url(al.PodName, e.signer.Mint("CA-log", al.PodName, agentPath)))
		for range 5 {
			echo(t, c, "hello")
		}
		c.Close(4100, "caller hung up")
		e.waitSockets(0)

		var opened, closed []map[string]any
		for _, l := range sink.lines(t) {
			switch l["msg"] {
			case "media socket opened":
				opened = append(opened, l)
			case "media socket closed":
				closed = append(closed, l)
			}
			if l["call_sid"] == "CA-log" && l["level"] != "INFO" && l["level"] != "WARN" {
				t.Errorf("line below info reached the info log: %v", l)
			}
		}
		if len(opened) != 1 || len(closed) != 1 {
			t.Fatalf("opened %d, closed %d lines; want one each:\n%v", len(opened), len(closed), sink.lines(t))
		}
		for _, l := range []map[string]any{opened[0], closed[0]} {
			if l["level"] != "INFO" || l["call_sid"] != "CA-log" || l["merchant_id"] != "m1" ||
				l["provider"] != "twilio" || l["pod"] != al.PodName {
				t.Errorf("line lacks the call's fields: %v", l)
			}
		}
		if opened[0]["failovers"] != 0.0 {
			t.Errorf("opened line: %v", opened[0])
		}
		cl := closed[0]
		if cl["by"] != "client" || cl["code"] != "4100" || cl["messages_in"] != 5.0 || cl["messages_out"] != 5.0 ||
			cl["bytes_in"].(float64) <= 5*5 || cl["bytes_out"].(float64) <= 5*5 || cl["duration"] == nil ||
			cl["released"] != "socket_close" || cl["release"] != "released" {
			t.Errorf("closed line: %v", cl)
		}

		tl, err := e.alloc.Timeline(ctx, "CA-log")
		if err != nil {
			t.Fatal(err)
		}
		if tl.State != "ended" || tl.ReleasedBy != "socket" || tl.SocketEnd != "socket_close" || tl.ClosedBy != "client" ||
			tl.CloseCode != "4100" || tl.SocketReplica != "replica-t" || tl.SocketOpenedAt.IsZero() ||
			tl.SocketClosedAt.Before(tl.SocketOpenedAt) || tl.Relayed == nil ||
			tl.Relayed.MessagesIn != 5 || tl.Relayed.MessagesOut != 5 ||
			float64(tl.Relayed.BytesIn) != cl["bytes_in"] || float64(tl.Relayed.BytesOut) != cl["bytes_out"] {
			t.Errorf("timeline = %+v (relayed %+v)", tl, tl.Relayed)
		}
		if time.Since(tl.EndedAt) > time.Minute {
			t.Errorf("ended_at = %v", tl.EndedAt)
		}
	})
}

// A socket that reached no pod ends its call with a line naming the call's
// merchant and provider, as every line about a call does.
func TestSocketThatReachedNoPodLogsItsCall(t *testing.T) {
	sink := &lockedBuf{}
	log := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := newEnv(t, envOpt{log: log, cfg: func(c *Config) {
		failoverCfg(c)
		c.ConnectAttempts = 1
	}})
	al, err := e.alloc.Allocate(context.Background(), allocator.Request{CallID: "CA-gone", MerchantID: "m1", Creator: "provider:twilio"})
	if err != nil {
		t.Fatal(err)
	}
	e.addrMu.Lock()
	e.addrs[al.PodName] = brokenPod(t, "closed")
	e.addrMu.Unlock()
	if _, err := e.dial(e.url(al.PodName, e.signer.Mint("CA-gone", al.PodName, agentPath))); err == nil || !strings.Contains(err.Error(), "status 502") {
		t.Fatalf("dial = %v, want 502", err)
	}
	var ended []map[string]any
	for _, l := range sink.lines(t) {
		if l["msg"] == "media socket reached no pod: call ended" {
			ended = append(ended, l)
		}
	}
	if len(ended) != 1 {
		t.Fatalf("%d 'call ended' lines, want 1:\n%v", len(ended), sink.lines(t))
	}
	if l := ended[0]; l["call_sid"] != "CA-gone" || l["merchant_id"] != "m1" || l["provider"] != "twilio" || l["pod"] != al.PodName {
		t.Errorf("line lacks the call's fields: %v", l)
	}
}
