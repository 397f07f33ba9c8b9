package allocator

import (
	"slices"
	"strings"
	"testing"
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
			if strings.Contains(src, "\nlocal function "+d.names[0]+"(") || strings.Contains(src, "\nlocal "+strings.Join(d.names, ", ")+" =") {
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
