package allocator_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// predecessor replays the predecessor's documented command sequences
// (seeds 000 "Allocation Flow by Tier", 003 flow 07, 004 flow 09): one
// command per step, nothing atomic but its two small scripts. It is what a
// smart-router replica still running beside edge does to the same Redis.
type predecessor struct {
	rdb   redis.UniversalClient
	k     allocator.Keys
	tiers allocator.TierConfig
	// window, when set, is read-locked across the steps between SPOP and
	// the pod info write of an exclusive allocation: the predecessor's own
	// zombie cleanup may recover a pod in that window too (seeds 002), so
	// a test that sweeps in a tight loop keeps its sweeps out of it.
	window *sync.RWMutex
}

// predLock is the idempotency lock (seeds 000 §3a: HGETALL + HSET _lock +
// EXPIRE 30s).
var predLock = redis.NewScript(`local e = redis.call('HGETALL', KEYS[1])
if #e > 0 then return e end
redis.call('HSET', KEYS[1], '_lock', '1') redis.call('EXPIRE', KEYS[1], 30) return {}`)

// predShared is the shared allocate script (seeds 000 §1b): the least
// loaded non-draining pod under max_concurrent gets ZINCRBY +1.
var predShared = redis.NewScript(`local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #r, 2 do
  if tonumber(r[i+1]) < tonumber(ARGV[1]) and redis.call('EXISTS', ARGV[2] .. r[i]) == 0 then
    redis.call('ZINCRBY', KEYS[1], 1, r[i]) return r[i]
  end
end
return false`)

// predSharedRelease is the shared release script (seeds 000 §1b): ZINCRBY
// -1, floored at 0.
var predSharedRelease = redis.NewScript(`local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > 0 then return redis.call('ZINCRBY', KEYS[1], -1, ARGV[1]) end return 0`)

// allocate walks the default chain as the predecessor did; it reports the
// pod of a new allocation, or "" when every pool was empty (its 30 s lock
// key stays, as documented) or the call already had a pod.
func (p *predecessor) allocate(ctx context.Context, call string) string {
	pod, existing := p.allocateCall(ctx, call)
	if existing {
		return ""
	}
	return pod
}

// allocateCall is the predecessor's whole allocate (seeds 003 steps 1-7):
// the pod it answers, and whether it answered the call's existing one.
func (p *predecessor) allocateCall(ctx context.Context, call string) (pod string, existing bool) {
	if pod, locked := p.lock(ctx, call); !locked {
		return pod, true
	}
	return p.allocateLocked(ctx, call), false
}

// lock is step 2, the idempotency check: the call's existing pod, or
// locked. Call info holding only the lock of another request counts as
// not yet allocated and the request goes on (seeds 003 "Lock placeholder
// only (race)": the predecessor's own double allocation).
func (p *predecessor) lock(ctx context.Context, call string) (existingPod string, locked bool) {
	e, _ := predLock.Run(ctx, p.rdb, []string{p.k.Call(call)}).StringSlice()
	for i := 0; i+1 < len(e); i += 2 {
		if e[i] == "pod_name" {
			return e[i+1], false
		}
	}
	return "", true
}

// allocateLocked is steps 3-7, after the lock: merchant config, the chain
// walk and the store.
func (p *predecessor) allocateLocked(ctx context.Context, call string) string {
	p.rdb.HGet(ctx, p.k.MerchantConfig(), "")
	drainingPrefix := strings.TrimSuffix(p.k.PodDraining("\x00"), "\x00")
	for _, tier := range p.tiers.DefaultChain {
		t := p.tiers.Tiers[tier]
		avail := p.k.PoolAvailable(tier)
		if t.Type == allocator.Shared {
			pod, err := predShared.Run(ctx, p.rdb, []string{avail}, t.MaxConcurrent, drainingPrefix).Text()
			if err == nil && pod != "" {
				p.store(ctx, call, pod, tier)
				return pod
			}
			continue
		}
		if p.window != nil {
			p.window.RLock()
		}
		pod, err := p.rdb.SPop(ctx, avail).Result()
		if err != nil {
			p.unlock()
			continue
		}
		if p.rdb.Exists(ctx, p.k.PodDraining(pod)).Val() == 1 {
			p.rdb.SAdd(ctx, avail, pod)
			p.unlock()
			continue
		}
		p.store(ctx, call, pod, tier)
		p.unlock()
		return pod
	}
	return ""
}

func (p *predecessor) unlock() {
	if p.window != nil {
		p.window.RUnlock()
	}
}

// store is the five store steps of an allocation.
func (p *predecessor) store(ctx context.Context, call, pod, tier string) {
	ck, now := p.k.Call(call), strconv.FormatInt(time.Now().Unix(), 10)
	p.rdb.HSet(ctx, ck, "pod_name", pod, "source_pool", "pool:"+tier, "merchant_id", "", "allocated_at", now)
	p.rdb.HDel(ctx, ck, "_lock")
	p.rdb.Expire(ctx, ck, 24*time.Hour)
	p.rdb.HSet(ctx, p.k.PodInfo(pod), "status", "allocated", "allocated_call_sid", call, "allocated_at", now, "source_pool", "pool:"+tier)
	p.rdb.Set(ctx, p.k.Lease(pod), call, allocator.PredecessorLeaseTTL)
	// Not in the seeds: the predecessor's binary also keeps the pod's calls
	// in a set, added here and removed at release (its reconciler reads the
	// set when the pod dies).
	p.rdb.SAdd(ctx, p.k.PredecessorPodCalls(pod), call)
}

// release is the predecessor's seven release steps; false when the call
// info was gone (its handler answered 404).
func (p *predecessor) release(ctx context.Context, call string) bool {
	ck := p.k.Call(call)
	info := p.rdb.HGetAll(ctx, ck).Val()
	pod := info["pod_name"]
	if pod == "" {
		return false
	}
	tier := strings.TrimPrefix(info["source_pool"], "pool:")
	avail := p.k.PoolAvailable(tier)
	draining := p.rdb.Exists(ctx, p.k.PodDraining(pod)).Val() == 1
	if p.tiers.Tiers[tier].Type == allocator.Shared {
		predSharedRelease.Run(ctx, p.rdb, []string{avail}, pod)
	} else if !draining && p.rdb.Exists(ctx, p.k.PodDraining(pod)).Val() == 0 {
		p.rdb.SAdd(ctx, avail, pod)
	}
	p.rdb.Del(ctx, p.k.Lease(pod))
	p.rdb.HSet(ctx, p.k.PodInfo(pod), "status", "available", "released_at", strconv.FormatInt(time.Now().Unix(), 10))
	p.rdb.SRem(ctx, p.k.PredecessorPodCalls(pod), call)
	p.rdb.Del(ctx, ck)
	return true
}

// mixedCheck runs inside Redis (one instant) over every call key: an
// exclusive pod serves at most one call and is not available while it
// does; a shared pod serves at most max_concurrent calls and its score is
// the number of calls naming it, whichever router allocated them.
//
// KEYS[1] -> call key pattern; ARGV: triples of pod, available key, max
// (0 = exclusive).
const mixedCheck = `
local perPod = {}
for _, ck in ipairs(redis.call('KEYS', KEYS[1])) do
  local pod = redis.call('HGET', ck, 'pod_name')
  if pod then perPod[pod] = (perPod[pod] or 0) + 1 end
end
local bad = {}
for i = 1, #ARGV, 3 do
  local pod, avail, max = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2])
  local n = perPod[pod] or 0
  if max == 0 then
    if n > 1 then bad[#bad+1] = pod .. ' serves ' .. n .. ' calls' end
    if n == 1 and redis.call('SISMEMBER', avail, pod) == 1 then bad[#bad+1] = pod .. ' is available while serving a call' end
  else
    if n > max then bad[#bad+1] = pod .. ' serves ' .. n .. ' calls > ' .. max end
    local score = tonumber(redis.call('ZSCORE', avail, pod) or '-1')
    if score ~= n then bad[#bad+1] = pod .. ' has score ' .. score .. ' but ' .. n .. ' calls' end
  end
end
return bad
`
