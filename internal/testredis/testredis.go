// Package testredis starts real redis-server processes for tests, and stops,
// kills and restarts them so that tests can inject Redis failures.
package testredis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	tb   testing.TB
	dir  string
	sock string
	port int // 0: unix socket only

	extra    []string // more redis-server arguments (replica, cluster)
	sentinel string   // sentinel config file: run as a sentinel

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Option changes how the server listens.
type Option func(*Server)

// TCP makes the server listen on a free loopback TCP port instead of a unix
// socket (for tests that measure the network path or run other processes).
func TCP() Option {
	return func(s *Server) { s.port = -1 }
}

// Start starts a redis-server that the test's cleanup stops. It fails the
// test when redis-server is not installed: the README's test command
// installs it.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("redis-server is not installed: run `make test`, which installs it, or `apt-get install redis-server`")
	}
	// A short directory: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "edge-redis-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb, dir: dir, sock: filepath.Join(dir, "redis.sock")}
	for _, o := range opts {
		o(s)
	}
	if s.port == -1 {
		s.port = freePort(tb)
	}
	tb.Cleanup(func() {
		s.Kill()
		os.RemoveAll(dir)
	})
	s.start()
	return s
}

// URL is a redis:// or unix:// URL of the server, for edge's config.
func (s *Server) URL() string {
	if s.port > 0 {
		return "redis://" + s.Addr()
	}
	return "unix://" + s.sock
}

// Addr is host:port (TCP) or the socket path.
func (s *Server) Addr() string {
	if s.port > 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	}
	return s.sock
}

// Options are go-redis options for the server.
func (s *Server) Options() *redis.Options {
	if s.port > 0 {
		return &redis.Options{Addr: s.Addr()}
	}
	return &redis.Options{Network: "unix", Addr: s.sock}
}

// Client returns a client that the test's cleanup closes.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(s.Options())
	s.tb.Cleanup(func() { c.Close() })
	return c
}

func (s *Server) start() {
	s.tb.Helper()
	var args []string
	if s.sentinel != "" {
		// A sentinel rewrites its config file, so it gets one of its own.
		args = append(args, s.sentinel, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(max(s.port, 0)),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--logfile", "",
	)
	if s.sentinel == "" {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, s.extra...)
	if s.port == 0 {
		args = append(args, "--unixsocket", s.sock, "--unixsocketperm", "700")
	}
	cmd := exec.Command("redis-server", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	// Ready when redis-server says so on its log; keep draining the log so
	// the server never blocks on a full pipe.
	ready := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 8192 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
			if line := strings.ToLower(sc.Text()); strings.Contains(line, "ready to accept connections") || strings.Contains(line, "+monitor master") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, out)
	}()
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		logMu.Lock()
		defer logMu.Unlock()
		s.tb.Fatalf("redis-server exited at start:\n%s", log.String())
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		s.tb.Fatalf("redis-server not ready after 20s")
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
}

// Stop shuts the server down (SIGTERM) and waits for it to exit. Clients
// then get connection errors until Restart.
func (s *Server) Stop() { s.signal(false) }

// Kill kills the server (SIGKILL) and waits for it to exit.
func (s *Server) Kill() { s.signal(true) }

func (s *Server) signal(kill bool) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot exit
	if kill {
		cmd.Process.Kill()
	} else {
		cmd.Process.Signal(os.Interrupt)
	}
	<-done
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing is
// answered, as with a hung or partitioned Redis. Resume undoes it.
func (s *Server) Pause() { s.sendSignal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT), its data intact.
func (s *Server) Resume() { s.sendSignal(syscall.SIGCONT) }

func (s *Server) sendSignal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Restart starts the server again on the same address, empty (nothing is
// persisted), as after a crash of a cache-only Redis.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	os.Remove(s.sock)
	s.start()
}

// CommandStats returns the calls per command from INFO commandstats (INFO
// itself excluded). Commands run inside scripts count under their own
// names: count round trips by "evalsha" and "eval".
func (s *Server) CommandStats(ctx context.Context, c *redis.Client) map[string]int64 {
	s.tb.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		s.tb.Fatalf("INFO commandstats: %v", err)
	}
	per := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		per[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return per
}

// CPU is the CPU time (user + system) the server has used, from INFO cpu,
// for benchmarks that report Redis' cost per operation.
func (s *Server) CPU(ctx context.Context, c *redis.Client) time.Duration {
	s.tb.Helper()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		s.tb.Fatalf("INFO cpu: %v", err)
	}
	var seconds float64
	for _, line := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			seconds += f
		}
	}
	return time.Duration(seconds * float64(time.Second))
}

// RoundTrips counts the round trips a client makes: commands sent alone and
// pipelines (one each). Add it with client.AddHook.
type RoundTrips struct{ n atomic.Int64 }

// Load is the count so far.
func (r *RoundTrips) Load() int64 { return r.n.Load() }

func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server at %s", s.URL()) }
