package runtimee2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// need skips the test unless the runtime tier was asked for and can run,
// and returns the image to run.
func need(t *testing.T) string {
	t.Helper()
	image := os.Getenv("EDGE_RUNTIME_IMAGE")
	if image == "" {
		t.Skip("EDGE_RUNTIME_IMAGE is not set: `make runtime-e2e` builds edge's image and runs it under podman and runc")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs containers with podman as root")
	}
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (`make runtime-e2e` installs it)", tool)
		}
	}
	if out, err := exec.Command("podman", "image", "exists", image).CombinedOutput(); err != nil {
		t.Fatalf("image %s: %v %s (`make image` builds it)", image, err, out)
	}
	return image
}

var seq atomic.Int64

// running is a container started by the test, its `podman run` a child of
// the test process (attached: its stderr is the container's).
type running struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}
	// public, admin: http://127.0.0.1:<port> of the listeners.
	public, admin string

	mu  sync.Mutex
	log strings.Builder
}

// listening finds a listener's bound port in its log line.
var listening = regexp.MustCompile(`msg=listening (?:\S+ )*?listener=(\w+) addr=\S*:(\d+)`)

// start runs podman with args (podmanRun's, or any `run` line) as the
// container named for the test, and returns once edge has bound its public
// and admin listeners. The test's cleanup removes the container.
func start(t *testing.T, args []string) *running {
	t.Helper()
	name := fmt.Sprintf("edge-runtime-e2e-%d-%d", os.Getpid(), seq.Add(1))
	args = append([]string{args[0], "--name", name}, args[1:]...)
	c := &running{t: t, name: name, cmd: exec.Command("podman", args...), done: make(chan struct{})}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = io.Discard
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("podman", "rm", "--force", "--time", "0", name).Run()
		<-c.done
		if t.Failed() {
			t.Logf("container log:\n%s", c.Log())
		}
	})
	bound := make(chan [2]string, 3)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			if c.log.Len() < 4<<20 {
				c.log.WriteString(line + "\n")
			}
			c.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case bound <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
	}()
	go func() {
		<-scanned // Wait must not close the pipe before the log is read
		c.cmd.Wait()
		close(c.done)
	}()
	timeout := time.After(2 * time.Minute)
	for c.public == "" || c.admin == "" {
		select {
		case b := <-bound:
			switch b[0] {
			case "public":
				c.public = "http://127.0.0.1:" + b[1]
			case "admin":
				c.admin = "http://127.0.0.1:" + b[1]
			}
		case <-c.done:
			t.Fatalf("the container exited at start (%s):\n%s", c.cmd.ProcessState, c.Log())
		case <-timeout:
			t.Fatalf("edge not listening after 2m:\n%s", c.Log())
		}
	}
	return c
}

// Log is what the container wrote to stderr so far.
func (c *running) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// pid is the host pid of the container's first process (edge).
func (c *running) pid() int {
	c.t.Helper()
	out, err := exec.Command("podman", "inspect", "--format", "{{.State.Pid}}", c.name).Output()
	if err != nil {
		c.t.Fatalf("podman inspect: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		c.t.Fatalf("container pid %q", out)
	}
	return pid
}

// stop stops the container as the kubelet does, SIGTERM and then SIGKILL
// once grace has passed, and returns how long edge took to exit and its
// exit code.
func (c *running) stop(grace time.Duration) (took time.Duration, code int) {
	c.t.Helper()
	began := time.Now()
	out, err := exec.Command("podman", "stop", "--time", strconv.Itoa(int(grace/time.Second)), c.name).CombinedOutput()
	if err != nil {
		c.t.Fatalf("podman stop: %v %s", err, out)
	}
	<-c.done
	took = time.Since(began)
	// The exit code as the runtime recorded it (podman run's own mirrors it).
	o, err := exec.Command("podman", "inspect", "--format", "{{.State.ExitCode}}", c.name).Output()
	if err != nil {
		c.t.Fatalf("podman inspect: %v", err)
	}
	code, err = strconv.Atoi(strings.TrimSpace(string(o)))
	if err != nil {
		c.t.Fatalf("exit code %q", o)
	}
	if run := c.cmd.ProcessState.ExitCode(); run != code {
		c.t.Errorf("podman run exited %d, the container %d", run, code)
	}
	return took, code
}

// children are the host pids of pid's child processes whose command line
// contains s.
func children(pid int, s string) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 || i+2 > len(data) {
			continue
		}
		f := strings.Fields(string(data[i+2:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) || f[0] == "Z" {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
		if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), s) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			out = append(out, n)
		}
	}
	return out
}
