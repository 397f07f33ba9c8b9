package allocator

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// luaDef is one top-level definition of a library part: a local function
// or local constants, with the comment above it.
type luaDef struct {
	part  string
	names []string
	code  string
	refs  []string // identifiers the code uses (comments and strings left out)
	// deferred: a function most runs of a script never call, marked by a
	// comment line "-- deferred: <why>" above it. A script makes it, and
	// what only it reaches, on its first call (deferDefs).
	deferred bool
}

var (
	luaDefStart = regexp.MustCompile(`^local (?:function ([A-Za-z_]\w*)\(|([A-Za-z_][\w, ]*?)\s*=)`)
	luaIdent    = regexp.MustCompile(`[A-Za-z_]\w*`)
	luaKeyRef   = regexp.MustCompile(`\bK\.([A-Za-z_]\w*)`)
	luaKeyCall  = regexp.MustCompile(`\bK\.([A-Za-z_]\w*)\s*\(`)
	// A call of a name (not a field or method): name( preceded by neither
	// '.' nor ':'.
	luaCall = regexp.MustCompile(`(^|[^.:\w])([A-Za-z_]\w*)\s*\(`)
	// Names a chunk declares: locals, local functions, parameters, loop
	// variables.
	luaLocalNames = regexp.MustCompile(`\blocal\s+(?:function\s+)?([A-Za-z_][\w, ]*)`)
	luaParams     = regexp.MustCompile(`\bfunction\s*[\w.:]*\s*\(([\w, .]*)\)`)
	luaForNames   = regexp.MustCompile(`\bfor\s+([\w, ]+?)\s*(?:=|\bin\b)`)
	// A deferred definition's mark, in the comment above it.
	luaDeferredMark = regexp.MustCompile(`(?m)^-- deferred: \S`)
)

// luaMaxUpvalues is Lua 5.1's limit of the outer locals one function may
// use (LUAI_MAXUPVALUES).
const luaMaxUpvalues = 60

// luaGlobals are the names a script may call without defining them:
// Lua's base library as Redis gives it.
var luaGlobals = map[string]bool{
	"assert": true, "error": true, "getmetatable": true, "ipairs": true, "next": true, "pairs": true,
	"pcall": true, "rawequal": true, "rawget": true, "rawset": true, "select": true, "setmetatable": true,
	"tonumber": true, "tostring": true, "type": true, "unpack": true, "xpcall": true,
}

var luaKeywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true, "false": true,
	"for": true, "function": true, "if": true, "in": true, "local": true, "nil": true, "not": true,
	"or": true, "repeat": true, "return": true, "then": true, "true": true, "until": true, "while": true,
}

// loadLuaLib reads the library's parts, in partOrder.
func loadLuaLib() ([]luaDef, error) {
	var lib []luaDef
	for _, part := range partOrder {
		src, err := luaFiles.ReadFile("lua/lib/" + part + ".lua")
		if err != nil {
			return nil, err
		}
		lib = append(lib, parseLuaPart(part, string(src))...)
	}
	return lib, nil
}

// parseLuaPart splits a part into its top-level definitions. A definition
// starts at a line "local function f(" or "local A, B =" in the first
// column, with the comment lines right above it, and runs to the next one.
// What comes before the first (the part's header) belongs to none.
func parseLuaPart(part, src string) []luaDef {
	lines := strings.Split(src, "\n")
	var defs []luaDef
	var cur *luaDef
	var body []string
	flush := func(upto int) {
		if cur != nil {
			cur.code = strings.TrimRight(strings.Join(body[:upto], "\n"), "\n") + "\n"
			code := stripLua(cur.code)
			cur.refs = luaIdent.FindAllString(code, -1)
			defs = append(defs, *cur)
		}
	}
	for _, line := range lines {
		m := luaDefStart.FindStringSubmatch(line)
		if m == nil {
			body = append(body, line)
			continue
		}
		// The comment lines right above the definition are its own.
		above := len(body)
		for above > 0 && strings.HasPrefix(body[above-1], "--") {
			above--
		}
		flush(above)
		comment := slices.Clone(body[above:])
		names := []string{m[1]}
		if m[1] == "" {
			names = nil
			for n := range strings.SplitSeq(m[2], ",") {
				names = append(names, strings.TrimSpace(n))
			}
		}
		cur = &luaDef{part: part, names: names, deferred: luaDeferredMark.MatchString(strings.Join(comment, "\n"))}
		body = append(comment, line)
	}
	flush(len(body))
	return defs
}

// stripLua blanks out comments and string literals with spaces (keeping
// newlines and every offset), so that what is left are the code's names
// and brackets.
func stripLua(src string) string {
	b := []byte(src)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '-' && i+1 < len(b) && b[i+1] == '-':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '\'' || b[i] == '"':
			q := b[i]
			b[i] = ' '
			for i++; i < len(b) && b[i] != q; i++ {
				if b[i] == '\\' && i+1 < len(b) {
					b[i] = ' '
					i++
				}
				b[i] = ' '
			}
			if i < len(b) {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

// inlineKeys writes every key builder call of src out as what it builds:
// K.<name>() as the key's string, K.<name>(x) as the concatenation of the
// key's fixed parts and x. A builder defined as a Lua function would be
// made anew on every run of the script, and called at every use.
func inlineKeys(src string, keys map[string]luaKey) (string, error) {
	code := stripLua(src)
	refs := luaKeyCall.FindAllStringSubmatchIndex(code, -1)
	for n := len(refs) - 1; n >= 0; n-- {
		m := refs[n]
		name := code[m[2]:m[3]]
		k, ok := keys[name]
		if !ok {
			return "", fmt.Errorf("uses key builder K.%s, which Keys does not have", name)
		}
		open, depth, end := m[1]-1, 0, -1
		for i := open; i < len(code) && end < 0; i++ {
			switch code[i] {
			case '(':
				depth++
			case ')':
				depth--
				if depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return "", fmt.Errorf("K.%s( is not closed", name)
		}
		arg := strings.TrimSpace(src[open+1 : end])
		var expr string
		switch {
		case !k.arg && arg != "":
			return "", fmt.Errorf("K.%s takes no argument, given %s", name, arg)
		case k.arg && (arg == "" || topLevelComma(stripLua(arg))):
			return "", fmt.Errorf("K.%s takes one argument, given %q", name, arg)
		case !k.arg:
			expr = luaQuote(k.before)
		default:
			expr = "(" + arg + ")"
			if k.before != "" {
				expr = luaQuote(k.before) + " .. " + expr
			}
			if k.after != "" {
				expr += " .. " + luaQuote(k.after)
			}
			expr = "(" + expr + ")"
		}
		src = src[:m[0]] + expr + src[end+1:]
	}
	if rest := luaKeyRef.FindString(stripLua(src)); rest != "" {
		return "", fmt.Errorf("uses %s other than as a call", rest)
	}
	return src, nil
}

// topLevelComma says whether code (stripped) holds a comma outside
// brackets: more than one argument.
func topLevelComma(code string) bool {
	depth := 0
	for _, c := range code {
		switch c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				return true
			}
		}
	}
	return false
}

// assembleScript builds a script from the library definitions it reaches
// (those it uses of the parts it names, and what they use in turn) and
// its own code (body), with every key builder call written out
// (inlineKeys). It fails when the script uses a definition of a part it
// does not name, names a part none of whose definitions it uses, reaches a
// definition that uses one below it, calls a name nothing defines, or uses
// a key builder Keys does not have.
func assembleScript(keys Keys, lib []luaDef, body string, parts []string) (string, error) {
	byName := map[string]int{}
	for i, d := range lib {
		for _, n := range d.names {
			byName[n] = i
		}
	}
	used := make([]bool, len(lib))
	usedParts := map[string]bool{}
	bodyCode := stripLua(body)
	var walk func(refs []string)
	walk = func(refs []string) {
		for _, r := range refs {
			if i, ok := byName[r]; ok && !used[i] {
				used[i] = true
				walk(lib[i].refs)
			}
		}
	}
	// The parts a script names are those it calls itself; what their
	// definitions use comes with them, from whichever part holds it.
	for _, r := range luaIdent.FindAllString(bodyCode, -1) {
		i, ok := byName[r]
		if !ok {
			continue
		}
		if !slices.Contains(parts, lib[i].part) {
			return "", fmt.Errorf("uses %s of lib part %s, which its parts %v do not name", r, lib[i].part, parts)
		}
		usedParts[lib[i].part] = true
		walk([]string{r})
	}
	for _, p := range parts {
		if !slices.Contains(partOrder, p) {
			return "", fmt.Errorf("names lib part %s, which does not exist", p)
		}
		if !usedParts[p] {
			return "", fmt.Errorf("names lib part %s but uses none of its definitions", p)
		}
	}
	// A local is visible only below its definition: a definition that uses
	// one further down would read a global Redis refuses, when it runs.
	defined := map[string]bool{}
	for i, d := range lib {
		if !used[i] {
			continue
		}
		for _, n := range d.names {
			defined[n] = true
		}
		for _, r := range d.refs {
			if j, ok := byName[r]; ok && !defined[r] {
				return "", fmt.Errorf("lib part %s's %s uses %s of part %s, defined after it", d.part, d.names[0], r, lib[j].part)
			}
		}
	}
	code, err := deferDefs(lib, used, byName, body)
	if err != nil {
		return "", err
	}
	src, err := inlineKeys(code, keys.luaKeys())
	if err != nil {
		return "", err
	}
	if err := checkLuaCalls(src); err != nil {
		return "", err
	}
	return src, nil
}

// deferDefs writes a script's code: the definitions it uses (used) and
// its body. Redis makes a script's closures anew on every run, each one
// costing it about as much as an argument, so what most runs never call
// is made only on a run's first call of it: the definitions the script
// reaches only through deferred ones (luaDef.deferred) are locals of
// make_deferred, which makes them once per run, below every other
// definition, and returns the deferred functions by name; each call of
// one from the rest of the code is written as make_deferred().name(...).
func deferDefs(lib []luaDef, used []bool, byName map[string]int, body string) (string, error) {
	// hot: what the script reaches without going through a deferred
	// definition.
	hot := make([]bool, len(lib))
	entries := map[string]bool{}
	var walk func(refs []string)
	walk = func(refs []string) {
		for _, r := range refs {
			i, ok := byName[r]
			if !ok || hot[i] {
				continue
			}
			if lib[i].deferred {
				entries[r] = true
				continue
			}
			hot[i] = true
			walk(lib[i].refs)
		}
	}
	walk(luaIdent.FindAllString(stripLua(body), -1))
	var eager, later strings.Builder
	var entryFields []string
	for i, d := range lib {
		switch {
		case !used[i]:
		case hot[i]:
			eager.WriteString(d.code)
		default:
			later.WriteString(d.code)
			if entries[d.names[0]] {
				entryFields = append(entryFields, d.names[0]+" = "+d.names[0])
			}
		}
	}
	if later.Len() == 0 {
		return eager.String() + body, nil
	}
	// make_deferred's outer locals: what the deferred code uses of the
	// rest, and its own answer.
	upvalues := map[string]bool{"deferred": true}
	for _, r := range luaIdent.FindAllString(stripLua(later.String()), -1) {
		if i, ok := byName[r]; ok && hot[i] {
			upvalues[r] = true
		}
	}
	if len(upvalues) > luaMaxUpvalues {
		return "", fmt.Errorf("its deferred definitions use %d outer locals, more than Lua's %d", len(upvalues), luaMaxUpvalues)
	}
	hotCode, err := callDeferred(eager.String(), entries)
	if err != nil {
		return "", err
	}
	bodyCode, err := callDeferred(body, entries)
	if err != nil {
		return "", err
	}
	// make_deferred is declared first (the definitions above it call it)
	// and made below what it uses.
	indented := strings.TrimRight(strings.ReplaceAll(later.String(), "\n", "\n  "), " ")
	return "local make_deferred\n" + hotCode +
		"-- The deferred definitions, made on a run's first call of one\n" +
		"-- (scriptlib.go's deferDefs).\n" +
		"local deferred\n" +
		"make_deferred = function()\n" +
		"  if deferred then\n    return deferred\n  end\n  " +
		indented + "  deferred = {" + strings.Join(entryFields, ", ") + "}\n  return deferred\nend\n" + bodyCode, nil
}

// callDeferred writes every call in code of a name in entries as
// make_deferred().name(, and fails on any other use of such a name: it is
// nil until make_deferred ran.
func callDeferred(code string, entries map[string]bool) (string, error) {
	stripped := stripLua(code)
	calls := map[int]bool{}
	for _, m := range luaCall.FindAllStringSubmatchIndex(stripped, -1) {
		if entries[stripped[m[4]:m[5]]] {
			calls[m[4]] = true
		}
	}
	var out strings.Builder
	last := 0
	for _, m := range luaIdent.FindAllStringIndex(stripped, -1) {
		name := stripped[m[0]:m[1]]
		if !entries[name] || (m[0] > 0 && (stripped[m[0]-1] == '.' || stripped[m[0]-1] == ':')) {
			continue
		}
		if !calls[m[0]] {
			return "", fmt.Errorf("uses deferred %s other than in a call", name)
		}
		out.WriteString(code[last:m[0]])
		out.WriteString("make_deferred().")
		last = m[0]
	}
	out.WriteString(code[last:])
	return out.String(), nil
}

// checkLuaCalls fails when code calls a name it does not declare and Lua
// does not give (a definition left out, or one misspelt): Redis would
// fail only when the call runs.
func checkLuaCalls(src string) error {
	code := stripLua(src)
	declared := map[string]bool{}
	for _, re := range []*regexp.Regexp{luaLocalNames, luaParams, luaForNames} {
		for _, m := range re.FindAllStringSubmatch(code, -1) {
			for n := range strings.SplitSeq(m[1], ",") {
				declared[strings.TrimSpace(n)] = true
			}
		}
	}
	var missing []string
	for _, m := range luaCall.FindAllStringSubmatch(code, -1) {
		n := m[2]
		if !declared[n] && !luaGlobals[n] && !luaKeywords[n] && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("calls %s, which nothing defines", strings.Join(missing, ", "))
	}
	return nil
}
