package allocator

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/edge-voice/edge/internal/testredis"
)

func testLuaLib(t *testing.T) []luaDef {
	t.Helper()
	lib, err := loadLuaLib()
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// Every script names exactly the lib parts it calls, and every definition
// of the library is reached by some script.
func TestScriptsNameTheLibPartsTheyCall(t *testing.T) {
	lib := testLuaLib(t)
	reached := map[string]bool{}
	for _, name := range scriptNames {
		body, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src, err := assembleScript(NewKeys("voice:"), lib, string(body), scriptParts[name])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, d := range lib {
			// Made at the top, or deferred (in make_deferred).
			if strings.Contains(src, "\nlocal function "+d.names[0]+"(") || strings.Contains(src, "\nlocal "+strings.Join(d.names, ", ")+" =") ||
				strings.Contains(src, "\n  local function "+d.names[0]+"(") || strings.Contains(src, "\n  local "+strings.Join(d.names, ", ")+" =") {
				reached[d.names[0]] = true
			}
		}
	}
	for _, d := range lib {
		if !reached[d.names[0]] {
			t.Errorf("lib part %s defines %v, which no script uses", d.part, d.names)
		}
	}
	for name := range scriptParts {
		if !slices.Contains(scriptNames, name) {
			t.Errorf("scriptParts names %s, which is not a script", name)
		}
	}
}

// A script that calls a definition of a part it does not name, names a
// part it does not call, or calls what nothing defines is refused when
// the scripts are built, not when the call first runs in Redis.
func TestAssemblyRefusesAScriptWhosePartsDoNotFit(t *testing.T) {
	lib := testLuaLib(t)
	keys := NewKeys("voice:")
	release, err := luaFiles.ReadFile("lua/release.lua")
	if err != nil {
		t.Fatal(err)
	}
	withoutRecord := slices.DeleteFunc(slices.Clone(scriptParts["release"]), func(p string) bool { return p == "record" })
	cases := []struct {
		name, body string
		parts      []string
		want       string
	}{
		{"a part not named", "return take_from_chain({}, {}, nil)", []string{"clock"}, "uses take_from_chain of lib part placement"},
		{"release without record", string(release), withoutRecord, "of lib part record"},
		{"a part named but unused", "return now_ms()", []string{"clock", "pods"}, "names lib part pods but uses none"},
		{"a part that does not exist", "return now_ms()", []string{"clock", "clocks"}, "lib part clocks, which does not exist"},
		{"a call nothing defines", "return now_msec()", []string{}, "calls now_msec, which nothing defines"},
		{"a key builder Keys lacks", "return K.no_such_key('x')", []string{}, "K.no_such_key"},
	}
	for _, c := range cases {
		_, err := assembleScript(keys, lib, c.body, c.parts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", c.name, err, c.want)
		}
	}
	// A helper that calls one defined below it.
	upsideDown := append(parseLuaPart("clock", "local function f()\n  return g()\nend\n"),
		parseLuaPart("pods", "local function g()\n  return 1\nend\n")...)
	if _, err := assembleScript(keys, upsideDown, "return f()", []string{"clock"}); err == nil ||
		!strings.Contains(err.Error(), "uses g of part pods, defined after it") {
		t.Errorf("a helper using one defined after it: err %v", err)
	}
}

// A script holds the definitions it reaches and nothing more of the
// library: what it reaches through another definition comes with it from
// that definition's part. Its key builders are written out.
func TestAssembledScriptHoldsOnlyWhatItReaches(t *testing.T) {
	lib := testLuaLib(t)
	src, err := assembleScript(NewKeys("voice:"), lib, "return now_ms()", []string{"clock"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "local function now_ms(") || strings.Contains(src, "local function stale(") {
		t.Errorf("a script calling now_ms alone holds:\n%s", src)
	}
	src, err = assembleScript(NewKeys("voice:"), lib, "return write_allocation('c', 'm', '', '', 'p', 's', 'exclusive', 'a', 1, 1, 0)", []string{"record"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local function write_allocation(", "local function assign(", "local function count_call(",
		`local call_key = ("voice:call:" .. (call_id))`} {
		if !strings.Contains(src, want) {
			t.Errorf("write_allocation's script lacks %q", want)
		}
	}
	for _, unwanted := range []string{"local function end_call_record(", "local function take_from_chain(", "local function now_ms(", "K."} {
		if strings.Contains(stripLua(src), unwanted) {
			t.Errorf("write_allocation's script holds %q, which it does not reach", unwanted)
		}
	}
}

// Key builder calls become the keys they build, whatever their argument
// holds (calls, brackets and quotes in strings, comments after them), and
// Redis reads the same keys as the Go methods build.
func TestInlinedKeysAreTheGoKeys(t *testing.T) {
	keys := NewKeys("pfx:")
	src, err := inlineKeys(`return {K.call(x), K.replica_calls(f(a, ')')), K.ended_marks((g(1))), K.epoch(), K.wait_ring( ) -- K.call(
}`, keys.luaKeys())
	if err != nil {
		t.Fatal(err)
	}
	want := `return {("pfx:call:" .. (x)), ("pfx:replica:" .. (f(a, ')')) .. ":calls"), ("pfx:ended_marks:" .. ((g(1)))), "pfx:epoch", "pfx:wait:ring" -- K.call(
}`
	if src != want {
		t.Errorf("inlined:\n%s\nwant:\n%s", src, want)
	}
	if keys.ReplicaCalls("r") != "pfx:replica:r:calls" || keys.EndedMarks("3") != "pfx:ended_marks:3" || keys.WaitRing() != "pfx:wait:ring" {
		t.Fatalf("the expected keys are not the Go keys: %s %s %s", keys.ReplicaCalls("r"), keys.EndedMarks("3"), keys.WaitRing())
	}
	for _, bad := range []string{"K.call()", "K.call(a, b)", "K.epoch(a)", "K.call(a", "local k = K.call"} {
		if _, err := inlineKeys(bad, keys.luaKeys()); err == nil {
			t.Errorf("%s: inlined without an error", bad)
		}
	}
}

// A deferred definition, and what only it reaches, is made on a run's
// first call of it, not at the top of every run; a run that calls it gets
// the same answer as before, one that does not never makes it. A use of
// a deferred name other than a call is refused when the script is built.
func TestDeferredDefinitionsAreMadeOnFirstCall(t *testing.T) {
	lib := append(parseLuaPart("clock", "local function base(x)\n  return x + 1\nend\n"+
		"local ONLY_RARE = 40\n"+
		"local function helper(x)\n  return base(x) + ONLY_RARE\nend\n"+
		"-- deferred: a test's rare path.\nlocal function rare(x)\n  return helper(x) * 2\nend\n"),
		parseLuaPart("pods", "local function often(x)\n  if x > 10 then\n    return rare(x)\n  end\n  return base(x)\nend\n")...)
	if !lib[3].deferred || lib[2].deferred {
		t.Fatalf("deferred marks read as %v (helper), %v (rare)", lib[2].deferred, lib[3].deferred)
	}
	keys := NewKeys("voice:")
	src, err := assembleScript(keys, lib, "local n = tonumber(ARGV[1])\nif n < 0 then\n  rare(n)\nend\nreturn often(n)", []string{"clock", "pods"})
	if err != nil {
		t.Fatal(err)
	}
	for _, unwanted := range []string{"\nlocal function rare(", "\nlocal function helper(", "\nlocal ONLY_RARE ="} {
		if strings.Contains(src, unwanted) {
			t.Errorf("the script makes %q on every run:\n%s", unwanted, src)
		}
	}
	for _, want := range []string{"local function base(", "local function often(", "\n  local ONLY_RARE = 40", "make_deferred().rare(x)", "make_deferred().rare(n)"} {
		if !strings.Contains(src, want) {
			t.Errorf("the script lacks %q:\n%s", want, src)
		}
	}
	rdb := testredis.Start(t).Client()
	ctx := context.Background()
	for arg, want := range map[string]int64{"3": 4, "11": 104, "-5": -4} {
		got, err := rdb.Eval(ctx, src, nil, arg).Int64()
		if err != nil || got != want {
			t.Errorf("run with %s: %d, %v; want %d", arg, got, err, want)
		}
	}
	if _, err := assembleScript(keys, lib, "local f = rare\nreturn f(1)", []string{"clock"}); err == nil ||
		!strings.Contains(err.Error(), "uses deferred rare other than in a call") {
		t.Errorf("a deferred function used as a value: err %v", err)
	}
}
