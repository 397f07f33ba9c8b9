package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// A token-less socket (the predecessor's media URLs carry no token) can
// only be bound to a pod's one call; on a shared pod that also holds
// edge's calls it is refused (allocator TestTokenlessSocketsAreBoundToThePodsOneCall).
// docs/migration.md moved the media hostname to edge while the agents'
// allocate still reached the predecessor: a drill through its steps lost
// 43 of the 423 calls the predecessor placed in that state. The runbook
// now moves the agents' allocate first and the media hostname only after
// the predecessor's last call, and never has the operator turn
// proxy.require_token off.
func TestMigrationRunbookMovesTheMediaAfterThePredecessorStopsAllocating(t *testing.T) {
	raw, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, runbook, ok := strings.Cut(doc, "\n## The runbook\n")
	if !ok {
		t.Fatal("docs/migration.md has no runbook section")
	}
	runbook, _, _ = strings.Cut(runbook, "\n## ")
	step := map[string]int{}
	for i, m := range regexp.MustCompile(`(?m)^### (\d)\. (.+)$`).FindAllStringSubmatch(runbook, -1) {
		title := strings.ToLower(m[2])
		switch {
		case strings.Contains(title, "allocate"):
			step["allocate"] = i + 1
		case strings.Contains(title, "media"):
			step["media"] = i + 1
		case strings.Contains(title, "webhook"):
			step["webhooks"] = i + 1
		}
	}
	if step["allocate"] == 0 || step["media"] == 0 || step["webhooks"] == 0 {
		t.Fatalf("runbook steps found: %v; want the webhooks, the agents' allocate and the media moved", step)
	}
	if step["media"] < step["allocate"] {
		t.Errorf("the runbook moves the media (step %d) before the agents' allocate (step %d): the predecessor places calls whose token-less media edge refuses on shared pods",
			step["media"], step["allocate"])
	}
	media := runbook[strings.Index(runbook, "### "+string(rune('0'+step["media"]))+"."):]
	if !strings.Contains(strings.SplitN(media, "\n### ", 2)[0], "no call the predecessor allocated is left") {
		t.Error("the media step does not wait until no call the predecessor allocated is left")
	}
	if strings.Contains(runbook, "`proxy.require_token: false` until") || strings.Contains(runbook, "set `proxy.require_token: false`") {
		t.Error("the runbook has the operator turn proxy.require_token off")
	}
}
