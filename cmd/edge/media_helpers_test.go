package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/fakeagent"
)

// mediaReplica is one running edge process.
type mediaReplica struct {
	name          string
	cmd           *exec.Cmd
	public, admin string // http://127.0.0.1:port
	done          chan struct{}
	logMu         sync.Mutex
	log           bytes.Buffer
}

// mediaStartReplica runs bin with the config file (and env beside the
// test process's own) and waits until both listeners are bound (read from
// its JSON log).
func mediaStartReplica(t *testing.T, bin, name, configFile string, env ...string) *mediaReplica {
	t.Helper()
	r := &mediaReplica{name: name, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--config", configFile)
	if len(env) > 0 {
		r.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bound := make(chan [2]string, 1)
	go func() {
		var pub, adm string
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r.logMu.Lock()
			r.log.Write(append(sc.Bytes(), '\n'))
			r.logMu.Unlock()
			var line struct{ Msg, Listener, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				switch line.Listener {
				case "public":
					pub = line.Addr
				case "admin":
					adm = line.Addr
				}
				if pub != "" && adm != "" {
					bound <- [2]string{pub, adm}
					pub = ""
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, r.logText())
		}
	})
	select {
	case a := <-bound:
		r.public, r.admin = "http://"+a[0], "http://"+a[1]
	case <-r.done:
		t.Fatalf("%s exited at start:\n%s", name, r.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not listening after 60s:\n%s", name, r.logText())
	}
	return r
}

func (r *mediaReplica) logText() string {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.log.String()
}

// stop sends SIGTERM and waits for the process to exit.
func (r *mediaReplica) stop(t *testing.T, within time.Duration) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v of SIGTERM", r.name, within)
	}
}

// testAPIToken is the generic API token of the tests' edges (apiTokenYAML):
// the generic allocate API takes no anonymous caller but on the embedded
// default.
const testAPIToken = "edge-test-token-0123456789"

const apiTokenYAML = "generic_api:\n  tokens:\n    - {name: tests, token: " + testAPIToken + ", merchants: [\"*\"]}\n"

// postAuthorized posts JSON with the tests' API token (admin routes ignore
// it when no admin token is set).
func postAuthorized(url, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testAPIToken)
	return http.DefaultClient.Do(req)
}

// mediaPost posts a JSON body and decodes the JSON answer.
func mediaPost(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := postAuthorized(url, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// mediaPod reads a pod from the admin API.
type mediaPodInfo struct {
	Status string `json:"status"`
	Lease  string `json:"lease"`
	CallID string `json:"allocated_call_sid"`
}

func mediaPod(t *testing.T, admin, pod string) mediaPodInfo {
	t.Helper()
	resp, err := http.Get(admin + "/api/v1/pod/" + pod)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Pod mediaPodInfo }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Pod
}

func mediaWriteFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mediaAgent is a fake voice agent on loopback that serves until the test
// and its cleanups (the edge replicas first, registered later) are done.
func mediaAgent(t *testing.T) *fakeagent.Agent {
	t.Helper()
	ag, err := fakeagent.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ag.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ag
}
