// Package edgetest builds the edge binary once per test process and runs it
// as a real child process, for end-to-end tests and benchmarks.
package edgetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildOut  []byte
)

// Binary builds ./cmd/edge (once per test process) and returns its path.
// EDGE_BINARY names a prebuilt edge to run instead (a benchmark comparing
// commits runs each one's binary in turn).
func Binary(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("EDGE_BINARY"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "edge-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "edge")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/edge")
		cmd.Dir = moduleRoot()
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		tb.Fatalf("build edge: %v\n%s", buildErr, buildOut)
	}
	return binPath
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Process is a running edge.
type Process struct {
	tb   testing.TB
	cmd  *exec.Cmd
	done chan struct{}
	// PublicURL, AdminURL and InternalURL are http://127.0.0.1:<port> of
	// the listeners (https:// for one that terminates TLS; InternalURL ""
	// when args turn listen.internal off).
	PublicURL, AdminURL, InternalURL string

	mu  sync.Mutex
	log strings.Builder
}

// listening finds a listener's bound port in its log line; attributes of
// the logger itself (replica=...) may come before the line's own.
var listening = regexp.MustCompile(`msg=listening (?:\S+ )*?listener=(\w+) addr=\S*:(\d+)(?: tls=(\w+))?`)

// Start runs edge with args (both listeners on 127.0.0.1:0 unless args say
// otherwise) and env appended to a minimal environment, and returns once
// both listeners are bound (read from the info-level "listening" log lines,
// so the log level must stay at info or below). The test's cleanup kills it.
func Start(tb testing.TB, args []string, env ...string) *Process {
	tb.Helper()
	return StartBinary(tb, Binary(tb), args, env...)
}

// StartBinary is Start with a given edge binary (e.g. another commit's,
// run beside this one's by a benchmark).
func StartBinary(tb testing.TB, bin string, args []string, env ...string) *Process {
	tb.Helper()
	args = append([]string{"--listen-public", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-internal", "127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Process{tb: tb, cmd: cmd, done: make(chan struct{})}
	bound := make(chan [3]string, 3)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.log.Len() < 1<<20 {
				p.log.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				bound <- [3]string{m[1], m[2], m[3]}
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("edge log:\n%s", p.Log())
		}
	})
	internalOff := slices.Contains(args, "--listen-internal=")
	for p.PublicURL == "" || p.AdminURL == "" || p.InternalURL == "" && !internalOff {
		select {
		case b := <-bound:
			u := "http://127.0.0.1:" + b[1]
			if b[2] == "true" {
				u = "https://127.0.0.1:" + b[1]
			}
			switch b[0] {
			case "public":
				p.PublicURL = u
			case "admin":
				p.AdminURL = u
			case "internal":
				p.InternalURL = u
			}
		case <-p.done:
			tb.Fatalf("edge exited at start:\n%s", p.Log())
		case <-time.After(60 * time.Second):
			tb.Fatalf("edge not listening after 60s:\n%s", p.Log())
		}
	}
	return p
}

// Log is what edge wrote to stderr so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill kills edge (SIGKILL) and waits for it.
func (p *Process) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit; it reports
// whether edge exited in time.
func (p *Process) Stop(timeout time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code after Done (-1 if killed by a signal).
func (p *Process) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// CPU returns the process's user+system CPU time so far, from /proc.
func (p *Process) CPU() time.Duration {
	d, err := ProcessCPU(p.Pid())
	if err != nil {
		p.tb.Fatal(err)
	}
	return d
}

// ProcessCPU returns the user+system CPU time of any process so far, from
// /proc (benchmarks measure other servers beside edge with it).
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read /proc stat: %w", err)
	}
	// Fields after the command name (which may hold spaces) are space
	// separated: utime and stime are fields 14 and 15 of the whole line.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}
