package balancer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// replica is a backend that answers every request with its name and
// /readyz with 200 while ready.
type replica struct {
	name  string
	ready atomic.Bool
	srv   *httptest.Server
}

func newReplica(t *testing.T, name string) *replica {
	r := &replica{name: name}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/readyz" {
			if !r.ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replica) backend() Backend {
	return Backend{Name: r.name, Addr: strings.TrimPrefix(r.srv.URL, "http://"), ReadyURL: r.srv.URL + "/readyz"}
}

func start(t *testing.T) *Balancer {
	t.Helper()
	b, err := Listen("127.0.0.1:0", Options{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return b
}

// get asks the balancer on a fresh connection which backend answers.
func get(b *Balancer) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + b.Addr() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func waitReady(t *testing.T, b *Balancer, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.WaitReady(ctx, func(ready []string) bool { return slices.Equal(ready, want) }); err != nil {
		t.Fatalf("ready backends %v, want %v", b.Ready(), want)
	}
}

func TestBalancerSendsNewConnectionsToReadyBackendsOnly(t *testing.T) {
	a, bk := newReplica(t, "a"), newReplica(t, "b")
	b := start(t)
	began := time.Now()
	b.SetBackends(a.backend(), bk.backend())

	// Nobody ready: the connection is reset.
	if _, err := get(b); !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(fmt.Sprint(err), "EOF") {
		t.Fatalf("with no ready backend: %v, want a reset", err)
	}
	if b.Refused() != 1 {
		t.Errorf("refused %d, want 1", b.Refused())
	}

	a.ready.Store(true)
	bk.ready.Store(true)
	waitReady(t, b, "a", "b")
	var got []string
	for range 4 {
		name, err := get(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, name)
	}
	if strings.Join(got, "") != "abab" && strings.Join(got, "") != "baba" {
		t.Errorf("round robin over two ready backends gave %v", got)
	}

	// An established connection to b outlives b's readiness; new ones go
	// to a only.
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	ask := func() string {
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	first := ask()
	if route, ok := b.Route(conn.LocalAddr().String()); !ok || route != first {
		t.Errorf("Route of the kept connection: %q %v, want %q", route, ok, first)
	}
	other := map[string]*replica{"a": bk, "b": a}[first]
	held := map[string]*replica{"a": a, "b": bk}[first]
	held.ready.Store(false)
	waitReady(t, b, other.name)
	for range 3 {
		if name, err := get(b); err != nil || name != other.name {
			t.Errorf("with only %s ready a new connection went to %q (%v)", other.name, name, err)
		}
	}
	if again := ask(); again != first {
		t.Errorf("the established connection moved from %s to %s", first, again)
	}

	// Nobody ready again: an outage from then on.
	other.ready.Store(false)
	waitReady(t, b)
	if _, err := get(b); err == nil {
		t.Error("a connection went through with no ready backend")
	}
	outages := b.Outages(began)
	if len(outages) != 2 || outages[0].From != began || outages[1].To.Before(outages[1].From) {
		t.Errorf("outages %+v: want the start and the one now", outages)
	}

	// A removed backend gets nothing, even when it is ready.
	held.ready.Store(true)
	other.ready.Store(true)
	b.SetBackends(other.backend())
	waitReady(t, b, other.name)
	for range 3 {
		if name, err := get(b); err != nil || name != other.name {
			t.Errorf("after removing %s a connection went to %q (%v)", held.name, name, err)
		}
	}
}

// A backend whose listener is gone before its probe says so: the
// connection is reset, not hung.
func TestBalancerResetsWhenTheBackendRefuses(t *testing.T) {
	a := newReplica(t, "a")
	a.ready.Store(true)
	b, err := Listen("127.0.0.1:0", Options{Interval: time.Hour}) // one probe only
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	b.SetBackends(a.backend())
	waitReady(t, b, "a")
	a.srv.Close()
	if _, err := get(b); err == nil {
		t.Fatal("a connection to a closed backend succeeded")
	}
	if b.Refused() != 1 {
		t.Errorf("refused %d, want 1", b.Refused())
	}
}
