package main

import (
	"encoding/json"
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

// mediaPost posts a JSON body and decodes the JSON answer.
func mediaPost(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := edgetest.PostAuthorized(url, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// mediaAgent is a fake voice agent on loopback that serves until the test
// and its cleanups (the edge replicas first, registered later) are done.
func mediaAgent(t *testing.T) *fakeagent.Agent {
	t.Helper()
	return edgetest.Agent(t, nil, "")
}
