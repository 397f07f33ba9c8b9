// Command agent is test/node-e2e's voice agent: the image of the
// voice-agent StatefulSet the test runs on its node (FROM scratch, this
// static binary alone, as edge's own image), since no registry is
// reachable for a real one.
//
//	agent serve   echo every WebSocket message back on any path, 200 on
//	              /health (the readiness probe), until SIGTERM; then take
//	              no new socket and exit once the open ones have ended
//	agent drain   the preStop hook: drain this pod through edge's internal
//	              listener (the predecessor's Service, smart-router:8080,
//	              which takes agents without credentials) and wait until
//	              the pod holds no call
//
// Both tell what they saw to the test's recorder, RECORDER_URL (a JSON
// event per POST; off when unset): sockets opened and how they ended, the
// preStop's start and end, SIGTERM and the exit; of a socket edge moved
// here from a dead pod (Edge-Resumed), also the opening edge replayed and
// the first media after it. The test judges the rollouts and the moves
// from these and from what its provider-side clients saw.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// Event is one thing an agent saw, as the recorder receives it.
type Event struct {
	Pod string `json:"pod"`
	IP  string `json:"ip,omitempty"`
	// start, open (Note: "Edge-Resumed: <n>" when edge moved the call
	// here), call (the call's "start" message named it: Call; Note: the
	// events of the socket's messages up to it, "opening connected,start"),
	// media (a moved call's first media message: Note "sequenceNumber
	// <n>"), close, prestop, draining (edge took the drain), drained,
	// term, exit
	Kind string    `json:"kind"`
	Call string    `json:"call,omitempty"`
	Path string    `json:"path,omitempty"`
	Code int       `json:"code,omitempty"` // close: the client's close status (-1: none)
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent serve|drain")
		os.Exit(2)
	}
	rep := newReporter(os.Getenv("RECORDER_URL"), os.Getenv("POD_NAME"), os.Getenv("POD_IP"))
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(rep, envOr("LISTEN", ":8000"))
	case "drain":
		err = drain(rep, envOr("EDGE_URL", "http://smart-router:8080"), os.Getenv("POD_NAME"), os.Getenv("POD_IP"))
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	rep.flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func serve(rep *reporter, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var live sync.WaitGroup
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		live.Add(1)
		defer live.Done()
		echo(rep, w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	rep.send(Event{Kind: "start"})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case err := <-errc:
		return err
	case <-sig:
	}
	rep.send(Event{Kind: "term"})
	// No new socket; the open ones (hijacked, so Shutdown does not wait
	// for them) end as their calls do, or the kubelet kills the pod.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(ctx)
	cancel()
	live.Wait()
	rep.send(Event{Kind: "exit"})
	return nil
}

// resumedHeader is what edge adds to the upgrade of a call it moved here
// from a dead pod (proxy.ResumedHeader): its moves so far.
const resumedHeader = "Edge-Resumed"

// message is what the agent reads of a media stream's message.
type message struct {
	Event    string `json:"event"`
	Sequence string `json:"sequenceNumber"`
	Start    struct {
		CallSid string `json:"callSid"`
	} `json:"start"`
}

// echo accepts a WebSocket and echoes until it closes. On a socket edge
// moved here it echoes no opening message (connected, start): edge
// replays those for this pod alone, the provider sent them once, to the
// first pod, and had their echo then; an echo now would put messages in
// the provider's stream it never sent at this point of it.
func echo(rep *reporter, w http.ResponseWriter, r *http.Request) {
	var protos []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				protos = append(protos, p)
			}
		}
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protos, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	path := r.URL.RequestURI()
	resumed := r.Header.Get(resumedHeader)
	open := Event{Kind: "open", Path: path}
	if resumed != "" {
		open.Note = resumedHeader + ": " + resumed
	}
	rep.send(open)
	c.SetReadLimit(1 << 20)
	// opening: the events of the messages before the first media one.
	var opening []string
	inMedia := false
	for {
		typ, msg, err := c.Read(context.Background())
		if err != nil {
			code := websocket.CloseStatus(err)
			rep.send(Event{Kind: "close", Path: path, Code: int(code), Note: err.Error()})
			if code == -1 {
				code = websocket.StatusNormalClosure
			}
			c.Close(code, "")
			return
		}
		var m message
		if typ == websocket.MessageText {
			json.Unmarshal(msg, &m)
		}
		replayed := false
		switch {
		case inMedia:
		case m.Event == "media":
			inMedia = true
			if resumed != "" {
				rep.send(Event{Kind: "media", Path: path, Note: "sequenceNumber " + m.Sequence})
			}
		default:
			opening = append(opening, m.Event)
			replayed = resumed != "" && (m.Event == "connected" || m.Event == "start")
			if m.Event == "start" {
				rep.send(Event{Kind: "call", Path: path, Call: m.Start.CallSid, Note: "opening " + strings.Join(opening, ",")})
			}
		}
		if replayed {
			continue
		}
		if err := c.Write(context.Background(), typ, msg); err != nil {
			rep.send(Event{Kind: "close", Path: path, Code: -1, Note: "write: " + err.Error()})
			return
		}
	}
}

// drain is the preStop hook: POST /api/v1/drain for this pod (this
// instance: its address), then wait while edge reports a call on it. 409
// pod_replaced: another instance holds the name (this one was force-
// deleted and the StatefulSet replaced it), nothing of this one's to wait
// for. It never fails the hook: the kubelet kills the container at the
// grace period's end whatever it returns.
func drain(rep *reporter, base, pod, ip string) error {
	rep.send(Event{Kind: "prestop"})
	body, _ := json.Marshal(map[string]string{"pod_name": pod, "pod_ip": ip})
	client := &http.Client{Timeout: 5 * time.Second}
	for start := time.Now(); ; {
		resp, err := client.Post(base+"/api/v1/drain", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				rep.send(Event{Kind: "draining"})
				break
			}
			if resp.StatusCode == http.StatusConflict {
				rep.send(Event{Kind: "drained", Note: "replaced: another instance holds the name"})
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Since(start) > 30*time.Second {
			rep.send(Event{Kind: "drained", Note: "drain refused: " + err.Error()})
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		var info struct {
			HasLease bool `json:"has_active_lease"`
			Pod      struct {
				Calls []string `json:"calls"`
			} `json:"pod"`
		}
		resp, err := client.Get(base + "/api/v1/pod/" + pod)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if err == nil && !info.HasLease && len(info.Pod.Calls) == 0 {
				rep.send(Event{Kind: "drained"})
				return nil
			}
		}
		time.Sleep(time.Second)
	}
}

// reporter posts events to the recorder in order, from one goroutine.
type reporter struct {
	url, pod, ip string
	ch           chan Event
	done         chan struct{}
}

func newReporter(url, pod, ip string) *reporter {
	r := &reporter{url: url, pod: pod, ip: ip, ch: make(chan Event, 1024), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *reporter) send(e Event) {
	e.Pod, e.IP, e.At = r.pod, r.ip, time.Now()
	fmt.Fprintf(os.Stderr, "%s %s %s %s %d %s\n", e.At.Format(time.RFC3339Nano), e.Kind, e.Call, e.Path, e.Code, e.Note)
	r.ch <- e
}

func (r *reporter) run() {
	defer close(r.done)
	client := &http.Client{Timeout: 3 * time.Second}
	for e := range r.ch {
		if r.url == "" {
			continue
		}
		b, _ := json.Marshal(e)
		for try := 0; try < 3; try++ {
			resp, err := client.Post(r.url, "application/json", bytes.NewReader(b))
			if err == nil {
				resp.Body.Close()
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// flush sends what is queued before the process exits.
func (r *reporter) flush() {
	close(r.ch)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
}
