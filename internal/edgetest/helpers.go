package edgetest

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testwait"
)

// APIToken is the generic API token of the tests' edges (APITokenYAML):
// the generic allocate API takes no anonymous caller but on the embedded
// default.
const APIToken = "edge-test-token-0123456789"

// APITokenYAML is the generic_api section that gives APIToken every
// merchant, for a test's config file.
const APITokenYAML = "generic_api:\n  tokens:\n    - {name: tests, token: " + APIToken + ", merchants: [\"*\"]}\n"

// PostAuthorized posts JSON with APIToken (admin routes ignore it when no
// admin token is set).
func PostAuthorized(url, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+APIToken)
	return http.DefaultClient.Do(req)
}

// WriteFile writes text to a file name in a directory of the test's own
// and returns its path.
func WriteFile(tb testing.TB, name, text string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// GetJSON gets a JSON document into out.
func GetJSON(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	DecodeJSON(resp, out)
	return nil
}

// DecodeJSON decodes a response's JSON body (its first MiB) into out and
// closes it.
func DecodeJSON(resp *http.Response, out any) {
	defer resp.Body.Close()
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

// PodInfo is a pod as the admin API shows it.
type PodInfo struct {
	Status string `json:"status"`
	Lease  string `json:"lease"`
	CallID string `json:"allocated_call_sid"`
}

// Pod reads a pod from the admin API at admin.
func Pod(tb testing.TB, admin, pod string) PodInfo {
	tb.Helper()
	resp, err := http.Get(admin + "/api/v1/pod/" + pod)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Pod PodInfo }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		tb.Fatal(err)
	}
	return body.Pod
}

// MediaOn points a media URL at the public listener public
// (http://host:port), as a load balancer would send it anywhere.
func MediaOn(public, wsURL string) string {
	i := strings.Index(wsURL, "/ws/pod/")
	if i < 0 {
		return wsURL
	}
	return "ws" + strings.TrimPrefix(public, "http") + wsURL[i:]
}

// TwilioSign is Twilio's webhook signature of form posted to u, written
// here from Twilio's documentation rather than taken from edge's plugin,
// so that a test posting as Twilio checks the plugin against it.
func TwilioSign(token, u string, form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		u += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(token))
	mac.Write([]byte(u))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ChildPID waits up to a minute for a child process of parent whose
// command line contains cmdline (a plugin process edge starts) and
// returns its pid.
func ChildPID(tb testing.TB, parent int, cmdline string) int {
	tb.Helper()
	var pid int
	testwait.Until(tb, 60*time.Second, cmdline+" process", func() bool {
		var ok bool
		pid, ok = FindChild(parent, cmdline)
		return ok
	})
	return pid
}

// FindChild finds a live child process of parent whose command line
// contains s.
func FindChild(parent int, s string) (int, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		data, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(parent) || f[0] == "Z" {
			continue
		}
		dir := filepath.Dir(st)
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), s) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return pid, true
		}
	}
	return 0, false
}

// Agent is a fake voice agent on loopback that serves until the test and
// its cleanups registered later (edge replicas first) are done; with rec,
// its sessions are recorded as pod's.
func Agent(tb testing.TB, rec *fakeagent.Recorder, pod string) *fakeagent.Agent {
	tb.Helper()
	ag, err := fakeagent.Listen("127.0.0.1:0", nil)
	if err != nil {
		tb.Fatal(err)
	}
	if rec != nil {
		ag.Record(rec, pod)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ag.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return ag
}
