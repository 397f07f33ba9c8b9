package allocator

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/testredis"
)

// docs/design.md's tables say what is in Redis and which scripts change
// it; these tests keep them equal to the code.

// designTable is the rows of the markdown table whose header line starts
// with header, each split into its cells.
func designTable(t *testing.T, header string) [][]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		case in:
			return rows
		}
	}
	if !in {
		t.Fatalf("docs/design.md has no table %q", header)
	}
	return rows
}

var backticked = regexp.MustCompile("`([^`]+)`")

// Every key builder of Keys (found by reflection, so a key added later is
// checked too) has its key in the data model table, and every key the
// table's first column names is one a builder makes.
func TestDesignDocNamesEveryKey(t *testing.T) {
	rows := designTable(t, "| key | type | meaning | from |")
	// A key of the table as a pattern: {name} stands for any part.
	var patterns, all []*regexp.Regexp
	var firsts []string
	toPattern := func(s string) *regexp.Regexp {
		quoted := regexp.QuoteMeta(s)
		return regexp.MustCompile("^" + regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(quoted, `[^ ]+`) + "$")
	}
	for _, row := range rows {
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			patterns = append(patterns, toPattern(m[1]))
			firsts = append(firsts, m[1])
		}
		for _, cell := range row {
			for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
				if strings.HasPrefix(m[1], "voice:") {
					all = append(all, toPattern(m[1]))
				}
			}
		}
	}
	k := NewKeys("")
	v := reflect.ValueOf(k)
	built := map[string]string{} // key -> method
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		mt := m.Type()
		if mt.NumOut() != 1 || mt.Out(0) != reflect.TypeFor[string]() || name == "Prefix" {
			continue
		}
		var args []reflect.Value
		for j := range mt.NumIn() {
			switch mt.In(j) {
			case reflect.TypeFor[string]():
				args = append(args, reflect.ValueOf("x:1")) // a colon: EndedCalls takes "<hour>:<shard>"
			case reflect.TypeFor[time.Time]():
				args = append(args, reflect.ValueOf(time.Now()))
			default:
				t.Fatalf("Keys.%s takes a %s: teach this test to call it", name, mt.In(j))
			}
		}
		key := m.Call(args)[0].String()
		built[key] = name
		if !slices.ContainsFunc(all, func(p *regexp.Regexp) bool { return p.MatchString(key) }) {
			t.Errorf("Keys.%s (%s) is not in docs/design.md's data model table", name, key)
		}
	}
	for i, p := range patterns {
		found := false
		for key := range built {
			found = found || p.MatchString(key)
		}
		if !found {
			t.Errorf("docs/design.md's data model names %s, which no Keys method builds", firsts[i])
		}
	}
}

// The scripts table has a row for every script, and names none that is
// not one.
func TestDesignDocNamesEveryScript(t *testing.T) {
	var named []string
	for _, row := range designTable(t, "| script | what it does atomically |") {
		for name := range strings.SplitSeq(row[0], " / ") {
			named = append(named, strings.TrimSpace(name))
		}
	}
	for _, name := range scriptNames {
		if !slices.Contains(named, name) {
			t.Errorf("script %s has no row in docs/design.md's scripts table", name)
		}
	}
	for _, name := range named {
		if !slices.Contains(scriptNames, name) {
			t.Errorf("docs/design.md's scripts table names %s, which is not a script", name)
		}
	}
}

// Every field a call's info gets on the paths that write it (allocate with
// an answering replica, an account and a trace; claim; a move; the resume
// mark; a provider's end while the socket is open; a handshake the
// provider retries; a pod leaving) and every field of its tombstone is
// named in the data model table's row of that key.
func TestDesignDocNamesEveryCallField(t *testing.T) {
	rows := designTable(t, "| key | type | meaning | from |")
	row := func(key string) string {
		for _, r := range rows {
			if strings.Contains(r[0], "`"+key+"`") {
				return strings.Join(r[1:], " | ")
			}
		}
		t.Fatalf("docs/design.md's data model has no row %s", key)
		return ""
	}
	callRow, tombRow := row("voice:call:{sid}"), row("voice:call_ended:{sid}")
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a, err := New(rdb, Config{LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: time.Minute,
		Tiers: TierConfig{Tiers: map[string]Tier{"gold": {Type: Exclusive, Target: 3}}, DefaultChain: []string{"gold"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.SetReplica("replica-a")
	for _, p := range []string{"g0", "g1", "g2"} {
		if _, err := a.RegisterPod(ctx, Pod{Name: p, Tier: "gold", Address: "127.0.0.1:9"}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	note := func(key string) {
		for f := range rdb.HGetAll(ctx, key).Val() {
			seen[f] = true
		}
	}
	trace := "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
	al, err := a.Allocate(ctx, Request{CallID: "CA1", MerchantID: "m1", Creator: "provider:twilio", Account: "AC1", TraceParent: trace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ClaimMediaOn(ctx, "CA1", al.PodName, "replica-a/s1", "replica-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkResumable(ctx, "CA1", "replica-a/s1"); err != nil {
		t.Fatal(err)
	}
	ej := Ejection{Backoff: time.Second, MaxBackoff: time.Second, MaxPercent: 100}
	if _, err := a.ResumeCall(ctx, "CA1", al.PodName, "replica-a/s1", ej, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.EndByProvider(ctx, "CA1", "provider:twilio", "AC1", "completed"); err != nil {
		t.Fatal(err)
	}
	note(a.keys.Call("CA1"))
	// A handshake the provider retries, and a pod that leaves.
	al2 := mustAllocateIn(t, a, "CA2")
	if _, err := a.ClaimMediaOn(ctx, "CA2", al2.PodName, "replica-a/s2", "replica-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DropFailedMediaClaim(ctx, "CA2", "replica-a/s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ClaimMediaOn(ctx, "CA2", al2.PodName, "replica-a/s3", "replica-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkResumable(ctx, "CA2", "replica-a/s3"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UnregisterPod(ctx, "", al2.PodName); err != nil {
		t.Fatal(err)
	}
	note(a.keys.Call("CA2"))
	for f := range seen {
		if !strings.Contains(callRow, "`"+f+"`") {
			t.Errorf("call info field %s is not in docs/design.md's row of voice:call:{sid}", f)
		}
	}
	if len(seen) < 15 {
		t.Errorf("saw only %d call info fields: %v", len(seen), seen)
	}
	if _, err := a.Release(ctx, "CA1"); err != nil {
		t.Fatal(err)
	}
	tomb := map[string]bool{}
	for f := range rdb.HGetAll(ctx, a.keys.CallEnded("CA1")).Val() {
		tomb[f] = true
		if !seen[f] && !strings.Contains(tombRow, "`"+f+"`") {
			t.Errorf("tombstone field %s is not in docs/design.md's row of voice:call_ended:{sid}", f)
		}
	}
}

func mustAllocateIn(t *testing.T, a *Allocator, call string) Allocation {
	t.Helper()
	al, err := a.Allocate(context.Background(), Request{CallID: call})
	if err != nil {
		t.Fatal(err)
	}
	return al
}
