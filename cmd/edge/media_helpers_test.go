package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
)

// mediaReplica is one running edge process, started from a config file
// with JSON logs.
type mediaReplica struct {
	*edgetest.Process
	name          string
	public, admin string // http://127.0.0.1:port
}

// mediaStartReplica runs bin with the config file (and env beside the
// test process's own) and waits until both listeners are bound.
func mediaStartReplica(t *testing.T, bin, name, configFile string, env ...string) *mediaReplica {
	t.Helper()
	p := edgetest.Run(t, edgetest.Options{Binary: bin, Args: []string{"--config", configFile}, Env: env, InheritEnv: true, Name: name})
	return &mediaReplica{Process: p, name: name, public: p.PublicURL, admin: p.AdminURL}
}

// stop sends SIGTERM and waits for the process to exit.
func (r *mediaReplica) stop(t *testing.T, within time.Duration) {
	t.Helper()
	r.Signal(syscall.SIGTERM)
	select {
	case <-r.Done():
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
