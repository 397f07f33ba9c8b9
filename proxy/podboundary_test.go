package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
)

// A pod's upgrade carries only what edge decided: the path, edge's own
// headers and, for a provider's call, the headers and subprotocols its
// plugin declares. Cookies, Authorization, Origin, a client's trace
// context, its extensions and any other header stop at edge.
func TestPodSeesOnlyWhatEdgeDecided(t *testing.T) {
	e := newEnv(t, envOpt{upgrade: func(provider string) ClientUpgrade {
		if provider != "twilio" {
			return ClientUpgrade{}
		}
		return ClientUpgrade{Headers: []string{"X-Twilio-Signature"}, Subprotocols: []string{"audio.v1"}}
	}})
	client := http.Header{
		"Cookie": {"session=1"}, "Authorization": {"Bearer stolen"}, "Origin": {"https://evil.example"},
		"User-Agent": {"attacker/1"}, "X-Custom": {"1"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"X-Twilio-Signature": {"c2lnbmVk"},
	}
	// Edge's headers and the upgrade's own, as the pod's server reads them.
	edgeOwn := []string{"Connection", "Upgrade", "Sec-Websocket-Key", "Sec-Websocket-Version",
		"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"}
	for name, tc := range map[string]struct {
		creator string
		want    []string // the client's headers the pod sees
	}{
		"provider call":    {"provider:twilio", []string{"X-Twilio-Signature", "Sec-Websocket-Protocol"}},
		"generic-API call": {"token:ops", nil},
	} {
		t.Run(name, func(t *testing.T) {
			id := "CA-" + strings.ReplaceAll(name, " ", "-")
			pod, u := e.allocateFor(id, "", tc.creator)
			before := len(e.agents[pod].Headers())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: client,
				Subprotocols: []string{"evil", "audio.v1"}, CompressionMode: websocket.CompressionContextTakeover})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
				t.Errorf("the client negotiated %q through edge; want no extension", ext)
			}
			echo(t, c, "hello")
			h := e.agents[pod].Headers()[before]
			var got []string
			for k := range h {
				if !slices.Contains(edgeOwn, k) {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("the pod read the client's %q, want only %q", got, want)
			}
			if tc.want != nil && (h.Get("Sec-Websocket-Protocol") != "audio.v1" || c.Subprotocol() != "audio.v1") {
				t.Errorf("subprotocol offered to the pod %q, chosen %q; want only the declared audio.v1",
					h.Get("Sec-Websocket-Protocol"), c.Subprotocol())
			}
			c.Close(websocket.StatusNormalClosure, "")
			e.waitSockets(0)
		})
	}
}

// pyPod is a pod served by python3-websockets (testdata/wspod.py): a
// WebSocket server edge did not write, with its own handshake checks.
type pyPod struct {
	addr string
	mu   sync.Mutex
	reqs []string // the upgrades it was asked for, as it printed them
}

func (p *pyPod) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// startPyPod runs testdata/wspod.py with Debian's python3 and its
// python3-websockets (installed by make deps).
func startPyPod(t *testing.T) *pyPod {
	t.Helper()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import websockets").Run(); err != nil {
		t.Fatalf("python3-websockets is not installed (%v): run `make deps`, which installs it", err)
	}
	script, _ := filepath.Abs("testdata/wspod.py")
	cmd := exec.Command(python, script)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &pyPod{}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch kind, rest, _ := strings.Cut(sc.Text(), " "); kind {
			case "LISTEN":
				listening <- rest
			case "REQ":
				p.mu.Lock()
				p.reqs = append(p.reqs, rest)
				p.mu.Unlock()
			}
		}
	}()
	select {
	case port := <-listening:
		p.addr = "127.0.0.1:" + port
	case <-time.After(20 * time.Second):
		t.Fatal("the python pod did not start")
	}
	return p
}

// pyGold makes both of the env's exclusive pods python3-websockets pods.
func (e *env) pyGold(t *testing.T) map[string]*pyPod {
	pods := map[string]*pyPod{"pod-a": startPyPod(t), "pod-b": startPyPod(t)}
	e.addrMu.Lock()
	defer e.addrMu.Unlock()
	for name, p := range pods {
		e.addrs[name] = p.addr
	}
	return pods
}

// A pod is blamed only for its own behaviour. A client that shapes its
// upgrade so that the pod refuses it (a malformed extension header, a
// compression offer) gets nothing of it to the pod; a pod that refuses the
// request edge built (a media parameter it does not take) answers the
// client with its status, and the pod is neither ejected nor left for
// another: the call ends with the pod's status in its record. Judged by a
// third-party server as the pod, counting the upgrades it was asked for.
func TestPodIsBlamedOnlyForItsOwnBehaviour(t *testing.T) {
	e := newEnv(t, envOpt{cfg: func(c *Config) { c.MaxEjectionPercent = 100; c.ConnectAttempts = 3 }})
	pods := e.pyGold(t)
	ctx := context.Background()
	asked := func() (n int) {
		for _, p := range pods {
			n += len(p.requests())
		}
		return n
	}

	t.Run("client headers the pod would refuse", func(t *testing.T) {
		for i, h := range []http.Header{{"Sec-WebSocket-Extensions": {";;;"}}, {"Sec-WebSocket-Extensions": {"permessage-deflate"}}} {
			_, u := e.allocate(fmt.Sprintf("CA-ext%d", i), "")
			before := asked()
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: h})
			cancel()
			if err != nil {
				t.Fatalf("with %v: %v; want the call's socket open", h, err)
			}
			if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
				t.Errorf("with %v the pod negotiated %q with the client", h, ext)
			}
			echo(t, c, "hello")
			if n := asked() - before; n != 1 {
				t.Errorf("with %v the pods were asked %d times, want once (no move)", h, n)
			}
			c.Close(websocket.StatusNormalClosure, "")
			e.waitSockets(0)
		}
	})

	t.Run("a pod's 4xx to edge's request", func(t *testing.T) {
		al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA-rate"})
		if err != nil {
			t.Fatal(err)
		}
		u := e.signer.URLWithQuery(e.base(), "CA-rate", al.PodName, agentPath, "sample-rate=44100")
		before := asked()
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, resp, err := websocket.Dial(dctx, u, nil)
		cancel()
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("dial = %v (%+v); want the pod's 400", err, resp)
		}
		if n := asked() - before; n != 1 {
			t.Errorf("the pods were asked %d times, want once: a refused request moves nowhere", n)
		}
		tl, err := e.alloc.Timeline(ctx, "CA-rate")
		if err != nil || tl.State != "ended" || len(tl.MovedFrom) != 0 || tl.SocketEnd != "pod_refused" || tl.CloseCode != "400" {
			t.Errorf("timeline = %+v, %v; want ended where it was, pod_refused 400", tl, err)
		}
		if got := value(e.px.metrics.refused.WithLabelValues("pod_refused")); got != 1 {
			t.Errorf("refused{pod_refused} = %v, want 1", got)
		}
	})

	ejected, err := e.alloc.Ejected(ctx)
	if err != nil || len(ejected) != 0 {
		t.Errorf("ejected = %v, %v; want none: no pod misbehaved", ejected, err)
	}
	for _, r := range dialReasons {
		if got := value(e.px.metrics.dialFailures.WithLabelValues(r)); got != 0 {
			t.Errorf("dial failures{%s} = %v, want 0", r, got)
		}
	}
	if got := value(e.px.metrics.failovers.WithLabelValues("moved")); got != 0 {
		t.Errorf("failovers{moved} = %v, want 0", got)
	}
}
