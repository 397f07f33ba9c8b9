package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// docAdmin is one `edge admin ...` the docs name: the command (its first
// word, two for the config groups), its words with placeholders replaced,
// and where it is written.
type docAdmin struct {
	name  string
	words []string
	stdin string // what an `echo '...' |` before it pipes in
	where string
}

var (
	docFence    = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	docSpan     = regexp.MustCompile("`([^`]+)`")
	docEchoPipe = regexp.MustCompile(`echo '([^']*)' \| *$`)
)

// docAdminCommands reads README.md and docs/*.md for `edge admin ...` in
// code spans and code blocks (a span may wrap across lines).
func docAdminCommands(t *testing.T) []docAdmin {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	var out []docAdmin
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		var snippets []string
		for _, m := range docFence.FindAllStringSubmatch(text, -1) {
			snippets = append(snippets, strings.Split(m[1], "\n")...)
		}
		for _, m := range docSpan.FindAllStringSubmatch(docFence.ReplaceAllString(text, ""), -1) {
			snippets = append(snippets, strings.ReplaceAll(m[1], "\n", " "))
		}
		for _, s := range snippets {
			i := strings.Index(s, "edge admin")
			if i < 0 {
				continue
			}
			var stdin string
			if m := docEchoPipe.FindStringSubmatch(strings.TrimSuffix(s[:i], "go run ./cmd/")); m != nil {
				stdin = m[1]
			}
			cmd, _, _ := strings.Cut(s[i+len("edge admin"):], " #")
			words := shellWords(cmd)
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				words = words[min(2, len(words)):] // a flag and its value
			}
			if len(words) == 0 || strings.HasPrefix(words[0], "[") || words[0] == "COMMAND" {
				continue // edge admin itself, or its usage line
			}
			name := words[0]
			if slices.Contains([]string{"tiers", "merchants", "pools"}, name) && len(words) > 1 {
				name += " " + words[1]
			}
			out = append(out, docAdmin{name: name, words: words, stdin: stdin, where: filepath.Base(f) + ": " + strings.TrimSpace(s)})
		}
	}
	return out
}

// shellWords splits a command line as a shell would for what the docs
// write: words, and single-quoted strings.
func shellWords(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return append(out, s[1:])
			}
			out = append(out, s[1:1+end])
			s = s[2+end:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out
}

// Every `edge admin ...` the docs and the runbook name runs against a live
// edge and does what the docs say: status and pods show the pods and their
// states, drain makes a pod draining in pods and undrain brings it back,
// release frees an allocated pod as pods sees it, call and calls show the
// live call, config the running configuration without its secrets, and
// the config commands read and write. A command the docs name that this
// test cannot check, or that edge admin lacks, fails it.
func TestAdminCommandsTheDocsName(t *testing.T) {
	docs := docAdminCommands(t)
	rs := testredis.Start(t)
	const token = "admin-token-0123456789abcdef"
	cfg := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
redis: {url: %q}
admin_token: %s
generic_api: {open: loopback}
leader: {identity: edge-docs}
pods:
  static:
    - {name: pod-a, address: "127.0.0.1:9", tier: standard}
    - {name: pod-b, address: "127.0.0.1:9", tier: standard}
    - {name: pod-c, address: "127.0.0.1:9", tier: basic}
`, rs.URL(), token)), 0o600)
	edge := edgetest.Start(t, []string{"--config", cfg})
	admin := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"admin", "--url", edge.AdminURL}, args...),
			[]string{"EDGE_ADMIN_TOKEN=" + token}, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	mustAdmin := func(args ...string) string {
		t.Helper()
		out, err := admin(args...)
		if err != nil {
			t.Fatalf("edge admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// podStates reads `edge admin pods -o json`.
	podStates := func() map[string]string {
		t.Helper()
		var a struct {
			Pods []struct {
				Name  string   `json:"pod_name"`
				State string   `json:"state"`
				Calls []string `json:"calls"`
			}
		}
		if err := json.Unmarshal([]byte(mustAdmin("pods", "-o", "json")), &a); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, p := range a.Pods {
			m[p.Name] = p.State + " " + strings.Join(p.Calls, ",")
		}
		return m
	}
	testwait.Until(t, 20*time.Second, "the pods registered", func() bool { return len(podStates()) == 3 })

	// A live call on an exclusive pod, allocated as a provider's would be.
	allocate := func(id string) string {
		t.Helper()
		resp, err := http.Post(edge.PublicURL+"/api/v1/allocate", "application/json",
			strings.NewReader(`{"call_sid":"`+id+`","merchant_id":"m1"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct {
			PodName string `json:"pod_name"`
		}
		json.NewDecoder(resp.Body).Decode(&a)
		if resp.StatusCode != http.StatusOK || a.PodName == "" {
			t.Fatalf("allocate %s: %d", id, resp.StatusCode)
		}
		return a.PodName
	}
	const call = "CA0000docs"
	pod := allocate(call)
	const merchant = "acme"
	releases := 0

	// What each command must do, run with the docs' words (placeholders
	// for a call, a pod or a merchant filled in).
	checks := map[string]func(d docAdmin, args []string){
		"status": func(_ docAdmin, args []string) {
			out := mustAdmin(args...)
			for _, want := range []string{"TIER", "standard", "basic", "active calls: 1", "this replica leads: yes"} {
				if !strings.Contains(out, want) {
					t.Errorf("edge admin status: no %q in\n%s", want, out)
				}
			}
		},
		"pods": func(_ docAdmin, args []string) {
			out := mustAdmin(args...)
			if !regexp.MustCompile(`(?m)^` + pod + ` +standard +allocated +` + call).MatchString(out) {
				t.Errorf("edge admin pods: no row for %s allocated to %s:\n%s", pod, call, out)
			}
		},
		"pod": func(_ docAdmin, args []string) {
			if out := mustAdmin(args...); !strings.Contains(out, "pod_name: "+args[1]) || !strings.Contains(out, "state: ") {
				t.Errorf("edge admin %s:\n%s", strings.Join(args, " "), out)
			}
		},
		"call": func(_ docAdmin, args []string) {
			out := mustAdmin(args...)
			for _, want := range []string{"call_sid: " + call, "state: live", "pod_name: " + pod, "merchant_id: m1"} {
				if !strings.Contains(out, want) {
					t.Errorf("edge admin call: no %q in\n%s", want, out)
				}
			}
		},
		"calls": func(_ docAdmin, args []string) {
			if out := mustAdmin(args...); strings.TrimSpace(out) != call {
				t.Errorf("edge admin calls %s = %q, want %s", args[1], out, call)
			}
		},
		"drain": func(_ docAdmin, args []string) {
			mustAdmin(args...)
			if st := podStates()[args[1]]; !strings.HasPrefix(st, "draining") {
				t.Errorf("after edge admin drain %s, pods says %q", args[1], st)
			}
			mustAdmin("undrain", args[1]) // as it was, for the next command
		},
		"undrain": func(_ docAdmin, args []string) {
			mustAdmin("drain", args[1])
			mustAdmin(args...)
			if st := podStates()[args[1]]; strings.HasPrefix(st, "draining") {
				t.Errorf("after edge admin undrain %s, pods says %q", args[1], st)
			}
		},
		"release": func(_ docAdmin, args []string) {
			// Each release takes a call of its own: the live one stays.
			releases++
			id := fmt.Sprintf("%s-%d", args[1], releases)
			args = []string{"release", id}
			p := allocate(id)
			if st := podStates()[p]; st != "allocated "+id && !strings.Contains(st, id) {
				t.Fatalf("before release, pods says %s is %q", p, st)
			}
			if out := mustAdmin(args...); !strings.Contains(out, "released") {
				t.Errorf("edge admin release: %s", out)
			}
			if st := podStates()[p]; strings.Contains(st, id) || (p != "pod-c" && st != "available ") {
				t.Errorf("after edge admin release %s, pods says %s is %q", id, p, st)
			}
		},
		"config": func(_ docAdmin, args []string) {
			out := mustAdmin(args...)
			if strings.Contains(out, token) || !strings.Contains(out, "admin_token: [redacted]") ||
				!strings.Contains(out, "pods.static[0].name: pod-a") || !strings.Contains(out, "leader.identity: edge-docs") {
				t.Errorf("edge admin config:\n%s", out)
			}
		},
		"log-level": func(_ docAdmin, args []string) {
			if out := mustAdmin(args...); !strings.Contains(out, `"level"`) {
				t.Errorf("edge admin %s: %s", strings.Join(args, " "), out)
			}
		},
		"tiers get": func(_ docAdmin, args []string) {
			if out := mustAdmin(args...); !strings.Contains(out, `"standard"`) {
				t.Errorf("edge admin tiers get: %s", out)
			}
		},
		"tiers set": func(d docAdmin, args []string) {
			// Inline JSON as the docs give it; else the docs' stdin if
			// they pipe one, else the tiers as they are, from a file.
			if len(args) > 2 && strings.HasPrefix(strings.TrimSpace(args[2]), "{") {
				mustAdmin(args...)
				var set map[string]json.RawMessage
				json.Unmarshal([]byte(args[2]), &set)
				if inner, ok := set["tiers"]; ok {
					json.Unmarshal(inner, &set)
				}
				out := mustAdmin("tiers", "get")
				for name := range set {
					if !strings.Contains(out, `"`+name+`"`) {
						t.Errorf("edge admin tiers get after %s has no tier %s: %s", d.where, name, out)
					}
				}
				return
			}
			in := d.stdin
			if in == "" {
				in = mustAdmin("tiers", "get")
			}
			f := filepath.Join(t.TempDir(), "tiers.json")
			os.WriteFile(f, []byte(in), 0o600)
			mustAdmin("tiers", "set", f)
		},
		"merchants list": func(_ docAdmin, args []string) {
			if out := mustAdmin(args...); !strings.Contains(out, "{") {
				t.Errorf("edge admin merchants list: %s", out)
			}
		},
		"merchants get": func(_ docAdmin, args []string) {
			mustAdmin("merchants", "set", args[2], `{"fallback":["basic"]}`)
			if out := mustAdmin(args...); !strings.Contains(out, `"basic"`) {
				t.Errorf("edge admin merchants get: %s", out)
			}
		},
		"merchants set": func(_ docAdmin, args []string) {
			if len(args) < 4 {
				args = append(args[:2], merchant, `{"fallback":["basic"]}`)
			}
			mustAdmin(args...)
			if out := mustAdmin("merchants", "get", args[2]); !strings.Contains(out, `"`) {
				t.Errorf("merchants get %s after set: %s", args[2], out)
			}
		},
		"merchants delete": func(_ docAdmin, args []string) {
			mustAdmin(args...)
		},
		"pools list": func(_ docAdmin, args []string) { mustAdmin(args...) },
		"pools set": func(_ docAdmin, args []string) {
			if len(args) < 4 {
				args = append(args[:2], merchant, "1")
			}
			mustAdmin(args...)
			if out := mustAdmin("pools", "list"); !strings.Contains(out, `"`+args[2]+`"`) {
				t.Errorf("pools list after pools set: %s", out)
			}
			// Back to no dedicated pods: the leader would move idle pods
			// into the merchant's pool under the next commands.
			mustAdmin("pools", "set", args[2], "0")
		},
	}
	// Commands that change the tiers run last, after the checks that read
	// the pods.
	slices.SortStableFunc(docs, func(a, b docAdmin) int {
		return boolInt(strings.HasPrefix(a.name, "tiers set")) - boolInt(strings.HasPrefix(b.name, "tiers set"))
	})
	seen := map[string]bool{}
	for _, d := range docs {
		check, ok := checks[d.name]
		if !ok {
			t.Errorf("%s: names `edge admin %s`, which this test does not check (or edge admin lacks)", d.where, d.name)
			continue
		}
		if !strings.Contains(adminUsage, "\n  "+d.name+" ") {
			t.Errorf("%s: edge admin --help does not list %q", d.where, d.name)
		}
		args, err := fillPlaceholders(d.words, call, pod, merchant)
		if err != nil {
			t.Errorf("%s: %v", d.where, err)
			continue
		}
		seen[d.name] = true
		t.Logf("%s -> edge admin %s", d.where, strings.Join(args, " "))
		check(d, args)
	}
	for _, name := range []string{"status", "pods", "drain", "undrain", "release", "call", "config"} {
		if !seen[name] {
			t.Errorf("no doc names `edge admin %s`", name)
		}
	}

	// Errors exit non-zero with what to do.
	for _, tc := range []struct {
		args    []string
		environ []string
		want    string
	}{
		{[]string{"status"}, nil, "wants its token"},
		{[]string{"--token", "wrong-token", "pods"}, nil, "refused the token"},
		{[]string{"drain", "pod-none"}, []string{"EDGE_ADMIN_TOKEN=" + token}, "404 Not Found: pod not found"},
		{[]string{"call", "CA-never"}, []string{"EDGE_ADMIN_TOKEN=" + token}, "404 Not Found: call not found"},
		{[]string{"release", "CA bad"}, []string{"EDGE_ADMIN_TOKEN=" + token}, "invalid id"},
		{[]string{"undrain", "../x"}, []string{"EDGE_ADMIN_TOKEN=" + token}, "invalid id"},
		{[]string{"--url", "http://127.0.0.1:1", "status"}, nil, "cannot reach the admin API at http://127.0.0.1:1"},
		{[]string{"-o", "yaml", "status"}, nil, "want table or json"},
	} {
		args := append([]string{"admin", "--url", edge.AdminURL}, tc.args...)
		err := run(context.Background(), args, tc.environ, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("edge admin %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// fillPlaceholders replaces the docs' placeholders with a live call, a pod
// and a merchant; a command with its required argument left out (the
// docs naming it in passing) gets one.
func fillPlaceholders(words []string, call, pod, merchant string) ([]string, error) {
	out := make([]string, 0, len(words)+1)
	for _, w := range words {
		switch w {
		case "CA…", "<call_sid>", "CALL_SID":
			w = call
		case "<pod>", "pod-7", "POD", "<name>":
			w = pod
		case "<id>", "ID":
			w = merchant
		case "[LEVEL]":
			continue
		}
		if strings.ContainsAny(w, "<>…") {
			return nil, fmt.Errorf("placeholder %q: teach TestAdminCommandsTheDocsName what to put there", w)
		}
		out = append(out, w)
	}
	switch {
	case len(out) == 1 && slices.Contains([]string{"drain", "undrain", "pod", "calls"}, out[0]):
		out = append(out, pod)
	case len(out) == 1 && out[0] == "call":
		out = append(out, call)
	case len(out) == 1 && out[0] == "release":
		out = append(out, "CA0000docs-release")
	case len(out) == 2 && (out[1] == "get" || out[1] == "delete") && out[0] == "merchants":
		out = append(out, merchant)
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
