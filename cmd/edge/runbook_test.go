package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Each alert's runbook section names at least one command to run, and the
// commands exist: an `edge ...` subcommand edge has, an HTTP route edge
// serves, a kubectl label selector that picks edge's pods (the runbook
// said app.kubernetes.io/name=edge, a label edge's pods do not carry).
func TestRunbookNamesCommandsThatExist(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := os.ReadFile("../../api/routes.go")
	if err != nil {
		t.Fatal(err)
	}
	deployment, err := os.ReadFile("../../deploy/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// kubectl's label selectors pick edge's pods by a label they carry.
	for _, m := range selector.FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(string(deployment), m[1]+": "+m[2]) {
			t.Errorf("docs/operations.md selects pods with -l %s=%s, a label deploy/base/deployment.yaml does not give edge's pods", m[1], m[2])
		}
	}
	sections := 0
	for _, sec := range strings.Split(string(doc), "\n### ")[1:] {
		title, body, _ := strings.Cut(sec, "\n")
		if !strings.HasPrefix(title, "Edge") {
			continue
		}
		body, _, _ = strings.Cut(body, "\n## ")
		sections++
		commands := 0
		for _, m := range codeSpan.FindAllStringSubmatch(body, -1) {
			code := m[1]
			if command.MatchString(code) {
				commands++
			}
			switch {
			case strings.HasPrefix(code, "edge admin "):
				words := strings.Fields(strings.TrimPrefix(code, "edge admin "))
				cmd := words[0]
				if len(words) > 1 && !strings.ContainsAny(words[1], "<…{'\"") && !strings.HasPrefix(words[1], "CA") {
					cmd += " " + words[1]
				}
				if !strings.Contains(adminUsage, "\n  "+cmd+" ") {
					t.Errorf("runbook %s names `%s`: edge admin has no %q", title, code, cmd)
				}
			case strings.HasPrefix(code, "edge "):
				sub := strings.Fields(code)[1]
				if !strings.Contains(usage, "edge "+sub) {
					t.Errorf("runbook %s names `%s`: edge has no subcommand %q", title, code, sub)
				}
			case httpRoute.MatchString(code):
				r := httpRoute.FindStringSubmatch(code)
				pattern := r[1] + " " + angle.ReplaceAllString(r[2], "{$1}")
				if !strings.Contains(string(routes), `"`+pattern+`"`) {
					t.Errorf("runbook %s names `%s`: no route %q in api/routes.go", title, code, pattern)
				}
			}
		}
		if commands == 0 {
			t.Errorf("runbook %s names no command to run (edge, kubectl, an HTTP route, ...)", title)
		}
	}
	if sections < 10 {
		t.Fatalf("found %d alert sections", sections)
	}
}

var (
	command   = regexp.MustCompile(`^(edge |kubectl |curl |openssl |redis-cli |(GET|POST|PUT|DELETE) /)`)
	selector  = regexp.MustCompile(`kubectl [^\x60]*-l ([a-z.]+)=([a-z0-9-]+)`)
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	httpRoute = regexp.MustCompile(`^(GET|POST|PUT|DELETE) (/[^ ?]*)`)
	angle     = regexp.MustCompile(`<([a-z_]+)>`)
)
