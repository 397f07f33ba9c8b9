package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
)

// Thousands of connections that hold a listener (idle keep-alives and
// bodies that never finish) are shed, and a real request still gets its
// answer. Before the bound, they were held until the process ran out of
// file descriptors.
func TestListenerShedsIdleAndSlowConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := &api.Surface{
		Handlers:    &api.Handlers{Log: slog.New(slog.DiscardHandler)},
		Ready:       &api.Readiness{},
		BodyTimeout: func() time.Duration { return time.Minute },
	}
	const max = 100
	ln, err := api.NewListener("public", "127.0.0.1:0", s.Public(), api.ListenerConfig{
		ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, MaxConns: max,
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ln.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := ln.Addr()

	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	// Idle keep-alive connections: one answered request each, then silence.
	for range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatalf("idle conn's first request: %v", err)
		}
	}
	// Slow bodies: headers promise 1 MB, a few bytes arrive.
	for range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "POST /api/v1/allocate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{")
	}
	// A real client gets through.
	for range 3 {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("a real request under the flood: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("healthz under the flood: %d %s", resp.StatusCode, body)
		}
	}
	// Every connection beyond the bound is shed as the listener accepts
	// it; the last ones dialled may still wait in the kernel's accept
	// queue when the real requests are answered, so the count is awaited.
	var shed float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if shed = shedCount(t, reg, "idle") + shedCount(t, reg, "slow"); shed >= 2000-max {
			return
		}
	}
	t.Errorf("shed %v connections, want at least %d", shed, 2000-max)
}

// shedCount reads edge_http_connections_shed_total{reason}.
func shedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edge_http_connections_shed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A body that never completes ends at the body deadline instead of holding
// the connection (it was held forever).
func TestSlowBodyEndsAtTheBodyDeadline(t *testing.T) {
	s := &api.Surface{
		Handlers:    &api.Handlers{Log: slog.New(slog.DiscardHandler)},
		Ready:       &api.Readiness{},
		BodyTimeout: func() time.Duration { return 200 * time.Millisecond },
	}
	ln, err := api.NewListener("public", "127.0.0.1:0", s.Public(), api.ListenerConfig{ReadHeaderTimeout: time.Second}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ln.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	c, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/v1/allocate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	// The test's own bound: far beyond the body deadline.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("slow body answered %d", resp.StatusCode)
		}
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server held a slow body past its deadline")
	}
}
