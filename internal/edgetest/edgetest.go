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

// Options says how Run starts edge.
type Options struct {
	// Binary is the edge to run; "" is Binary(tb), this tree's build.
	Binary string
	// Args are edge's arguments, e.g. --config <file>, --set k=v.
	Args []string
	// Env is appended to the environment: to PATH and HOME alone, or
	// with InheritEnv to the test process's whole environment.
	Env        []string
	InheritEnv bool
	// Listeners are the listeners Run waits for ("public", "admin",
	// "internal", "metrics"); nil is public and admin.
	Listeners []string
	// Ready makes Run wait also for readiness: the "edge is ready" line,
	// which edge logs once /readyz first passes (every plugin up).
	Ready bool
	// Name names the process in failure messages ("edge" when empty).
	Name string
	// FailureLines is how many of the log's last lines a failed test
	// prints; 0 prints the whole log.
	FailureLines int
}

// Process is a running edge.
type Process struct {
	tb   testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// readDone is closed once the log reader has read edge's stderr to
	// its end.
	readDone chan struct{}
	state    *os.ProcessState // set before done is closed
	// PublicURL, AdminURL and InternalURL are http://127.0.0.1:<port> of
	// the listeners Run waited for (https:// for one that terminates TLS;
	// "" for one it did not wait for).
	PublicURL, AdminURL, InternalURL string

	mu        sync.Mutex
	log       strings.Builder
	logged    chan struct{} // closed and replaced at each line of the log
	listeners map[string]string
}

// logLimit bounds the log kept in memory; past it the older half goes, so
// that a long run keeps its latest lines.
const logLimit = 8 << 20

// listening finds a listener's bound port in its log line, in edge's text
// format (attributes of the logger itself, replica=..., may come before the
// line's own) or its JSON format.
var (
	listening     = regexp.MustCompile(`msg=listening (?:\S+ )*?listener=(\w+) addr=\S*:(\d+)(?: tls=(\w+))?`)
	listeningJSON = regexp.MustCompile(`"msg":"listening".*?"listener":"(\w+)","addr":"[^"]*:(\d+)"(?:,"tls":(\w+))?`)
)

// readyLine is the line edge logs once readiness first passes, in either
// log format.
var readyLine = regexp.MustCompile(`msg="edge is ready"|"msg":"edge is ready"`)

// Start runs edge with args (the public, admin and internal listeners on
// 127.0.0.1:0 unless args say otherwise) and env appended to a minimal
// environment, and returns once the three listeners are bound (read from
// the info-level "listening" log lines, so the log level must stay at info
// or below; --listen-internal= leaves the internal one out). The test's
// cleanup kills it.
func Start(tb testing.TB, args []string, env ...string) *Process {
	tb.Helper()
	return StartBinary(tb, Binary(tb), args, env...)
}

// StartBinary is Start with a given edge binary (e.g. another commit's,
// run beside this one's by a benchmark).
func StartBinary(tb testing.TB, bin string, args []string, env ...string) *Process {
	tb.Helper()
	args = append([]string{"--listen-public", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-internal", "127.0.0.1:0"}, args...)
	listeners := []string{"public", "admin", "internal"}
	if slices.Contains(args, "--listen-internal=") {
		listeners = listeners[:2]
	}
	return Run(tb, Options{Binary: bin, Args: args, Env: env, Listeners: listeners})
}

// Run starts edge as o says and returns once the listeners o names are
// bound (and, with o.Ready, once edge is ready). It fails the test if edge
// exits first or is not there within 60 s. The test's cleanup kills edge
// and, if the test failed, prints its log.
func Run(tb testing.TB, o Options) *Process {
	tb.Helper()
	p := launch(tb, &o)
	start := time.Now()
	const within = 60 * time.Second
	for _, l := range o.Listeners {
		u, ok := p.await(within-time.Since(start), func() (string, bool) {
			u, ok := p.listeners[l]
			return u, ok
		})
		if !ok {
			p.failStart("listener " + l + " bound")
		}
		switch l {
		case "public":
			p.PublicURL = u
		case "admin":
			p.AdminURL = u
		case "internal":
			p.InternalURL = u
		}
	}
	if o.Ready && !p.WaitReady(within-time.Since(start)) {
		p.failStart("ready")
	}
	return p
}

// Refused starts edge as o says, for a start that must fail, and waits up
// to within for it to exit; it returns the exit code and the log. It fails
// the test if edge is still running then.
func Refused(tb testing.TB, o Options, within time.Duration) (int, string) {
	tb.Helper()
	p := launch(tb, &o)
	select {
	case <-p.done:
	case <-time.After(within):
		tb.Fatalf("%s still running %s after a start that must fail:\n%s", p.name, within, p.Log())
	}
	// The last lines may still be on their way; a child of edge that
	// kept its stderr open would hold the end back, hence the bound.
	select {
	case <-p.readDone:
	case <-time.After(5 * time.Second):
	}
	return p.ExitCode(), p.Log()
}

// launch starts the process, its log reader and its cleanup.
func launch(tb testing.TB, o *Options) *Process {
	tb.Helper()
	if o.Binary == "" {
		o.Binary = Binary(tb)
	}
	if o.Name == "" {
		o.Name = "edge"
	}
	if o.Listeners == nil {
		o.Listeners = []string{"public", "admin"}
	}
	cmd := exec.Command(o.Binary, o.Args...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if o.InheritEnv {
		env = os.Environ()
	}
	cmd.Env = append(env, o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout = nil // /dev/null
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Process{tb: tb, name: o.Name, cmd: cmd, done: make(chan struct{}), readDone: make(chan struct{}), logged: make(chan struct{}), listeners: map[string]string{}}
	// The process is waited for without exec.Cmd.Wait, which would close
	// stderr at the exit and cut off the last lines edge wrote (the
	// reason a start failed): the reader reads to the end and closes it.
	go func() {
		defer close(p.readDone)
		p.read(stderr)
		stderr.Close()
	}()
	go func() {
		p.state, _ = cmd.Process.Wait()
		close(p.done)
	}()
	lines := o.FailureLines
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("log of %s:\n%s", p.name, p.tail(lines))
		}
	})
	return p
}

func (p *Process) failStart(what string) {
	p.tb.Helper()
	select {
	case <-p.done:
		p.tb.Fatalf("%s exited at start (before %s):\n%s", p.name, what, p.Log())
	default:
		p.tb.Fatalf("%s not %s after 60s:\n%s", p.name, what, p.Log())
	}
}

// read keeps edge's log and the listeners it reports bound.
func (p *Process) read(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m := listening.FindStringSubmatch(line)
		if m == nil {
			m = listeningJSON.FindStringSubmatch(line)
		}
		p.mu.Lock()
		if p.log.Len() > logLimit {
			old := p.log.String()
			old = old[len(old)/2:]
			old = old[strings.IndexByte(old, '\n')+1:]
			p.log.Reset()
			p.log.WriteString(old)
		}
		p.log.WriteString(line + "\n")
		if m != nil {
			u := "http://127.0.0.1:" + m[2]
			if m[3] == "true" {
				u = "https://127.0.0.1:" + m[2]
			}
			p.listeners[m[1]] = u
		}
		close(p.logged)
		p.logged = make(chan struct{})
		p.mu.Unlock()
	}
	io.Copy(io.Discard, stderr)
}

// await calls found under the log's lock at each new line of the log
// until it reports true, edge exits, or within passes.
func (p *Process) await(within time.Duration, found func() (string, bool)) (string, bool) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		v, ok := found()
		next := p.logged
		p.mu.Unlock()
		if ok {
			return v, true
		}
		select {
		case <-next:
		case <-p.done:
			// The log may still hold lines written before the exit.
			p.mu.Lock()
			v, ok := found()
			p.mu.Unlock()
			return v, ok
		case <-deadline.C:
			return "", false
		}
	}
}

// WaitLog waits up to within for text in edge's log, woken by each line
// edge writes, and reports whether it came.
func (p *Process) WaitLog(within time.Duration, text string) bool {
	_, ok := p.await(within, func() (string, bool) { return "", strings.Contains(p.log.String(), text) })
	return ok
}

// WaitReady waits up to within for the "edge is ready" line and reports
// whether it came.
func (p *Process) WaitReady(within time.Duration) bool {
	_, ok := p.await(within, func() (string, bool) { return "", readyLine.MatchString(p.log.String()) })
	return ok
}

// Listener is the URL of a listener edge reported bound so far ("public",
// "admin", "internal", "metrics"), "" if none yet.
func (p *Process) Listener(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listeners[name]
}

// Name is the name Run was given.
func (p *Process) Name() string { return p.name }

// Log is what edge wrote to stderr so far (its latest 8 MiB at most).
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// tail is the log's last n lines (all of it for n 0).
func (p *Process) tail(n int) string {
	lines := strings.SplitAfter(p.Log(), "\n")
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to edge.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

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

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the exit code after Done (-1 if killed by a signal).
func (p *Process) ExitCode() int { return p.state.ExitCode() }

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
