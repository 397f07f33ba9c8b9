package allocator

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFiles embed.FS

// scriptNames lists every script; each is lua/<name>.lua.
var scriptNames = []string{
	"allocate", "release", "renew", "drain", "undrain", "unregister", "status",
	"sync", "sweep", "rebalance", "leader_acquire", "leader_renew", "leader_release", "leader_lease_fence",
	"claim", "unclaim", "move_call", "pod_failure", "reinstate",
	"wait_poll", "unwait", "presence", "orphans", "leave", "resumable",
}

// partOrder lists the parts of the scripts' library (lua/lib/<part>.lua),
// one concern each, in the order a script holds them: a part's
// definitions use only those above them, in their part or an earlier one.
var partOrder = []string{"clock", "pods", "placement", "ejection", "admission", "ended", "record", "recovery", "waits"}

// scriptParts names the library parts each script uses. Of them, a script
// holds only the definitions it reaches: Redis runs a script's definitions
// on every call (each one a closure to make), so what a script does not
// call costs it Redis time on every run. loadScripts refuses a script
// that uses a definition of a part not named here, or names a part it
// does not use.
var scriptParts = map[string][]string{
	"allocate":           {"clock", "pods", "placement", "admission", "ended", "record", "recovery", "waits"},
	"release":            {"clock", "pods", "ended", "record", "waits"},
	"renew":              {"clock", "pods", "admission", "ended", "recovery"},
	"drain":              {"clock", "pods"},
	"undrain":            {"clock", "pods", "waits"},
	"unregister":         {"pods", "ended", "record"},
	"status":             {"clock", "pods"},
	"sync":               {"clock", "pods", "ended", "record"},
	"sweep":              {"clock", "pods", "ended", "record", "waits"},
	"rebalance":          {"clock", "pods"},
	"leader_acquire":     {},
	"leader_renew":       {},
	"leader_release":     {},
	"leader_lease_fence": {},
	"claim":              {"clock"},
	"unclaim":            {},
	"move_call":          {"clock", "pods", "placement", "ejection", "admission"},
	"pod_failure":        {"clock", "ejection"},
	"reinstate":          {},
	"wait_poll":          {"clock", "waits"},
	"unwait":             {"waits"},
	"presence":           {"clock", "ended", "recovery"},
	"orphans":            {"clock", "pods"},
	"leave":              {},
	"resumable":          {},
}

// script is one Lua state change, run with EVALSHA (EVAL on NOSCRIPT, e.g.
// after a Redis restart) through go-redis.
type script struct {
	name string
	*redis.Script
}

// loadScripts builds every script as: the key builders it uses (generated
// from keys), then the library definitions it reaches from its parts
// (scriptParts), then the script's own file.
func loadScripts(keys Keys) (map[string]*script, error) {
	lib, err := loadLuaLib()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*script, len(scriptNames))
	for _, name := range scriptNames {
		body, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return nil, err
		}
		src, err := assembleScript(keys, lib, string(body), scriptParts[name])
		if err != nil {
			return nil, fmt.Errorf("script %s: %w", name, err)
		}
		out[name] = &script{name: name, Script: redis.NewScript(src)}
	}
	return out, nil
}

// run runs a script and returns its reply as a slice, timing it.
func (a *Allocator) run(ctx context.Context, name string, keys []string, args ...any) ([]any, error) {
	s := a.scripts[name]
	ctx, end := a.startScript(ctx, name)
	start := time.Now()
	reply, err := s.Run(ctx, a.rdb, keys, args...).Slice()
	a.metrics.observeScript(name, time.Since(start), err)
	end(err)
	if err != nil {
		return nil, fmt.Errorf("redis script %s: %w", name, unavailable(err))
	}
	return reply, nil
}

// Preload loads every script into Redis (SCRIPT LOAD), so that the first
// calls need no EVAL fallback. Optional: scripts load themselves on demand.
func (a *Allocator) Preload(ctx context.Context) error {
	for _, name := range scriptNames {
		if err := a.scripts[name].Load(ctx, a.rdb).Err(); err != nil {
			return fmt.Errorf("load script %s: %w", name, err)
		}
	}
	return nil
}

// staleMargin is how far past its caller's deadline a script still acts:
// the replica's clock and Redis' may differ by that much.
const staleMargin = time.Second

// staleAfter is the unix ms past which a script of ctx's caller changes
// nothing ("stale"): a command that reaches Redis after the caller gave
// up, held in a socket's buffers through a pause or a partition, must not
// allocate for a webhook answered "cannot serve" or claim for a socket
// refused. 0 when ctx has no deadline.
func staleAfter(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return d.Add(staleMargin).UnixMilli()
}

// errStale: the caller's deadline passed before Redis ran its script,
// which changed nothing (nobody waits for the answer any more).
var errStale = fmt.Errorf("the caller gave up before Redis ran the script: %w", ErrUnavailable)

// reply decodes a script's array reply by position.
type reply []any

func (r reply) str(i int) string {
	if i >= len(r) {
		return ""
	}
	s, _ := r[i].(string)
	return s
}

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	n, _ := r[i].(int64)
	return n
}

func (r reply) strs(from int) []string {
	var out []string
	for i := from; i < len(r); i++ {
		out = append(out, r.str(i))
	}
	return out
}
