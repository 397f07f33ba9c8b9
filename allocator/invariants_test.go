package allocator_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// checkQuiescent asserts the state after every call was released: no call
// info, no lease, no per-call lease left; every registered pod back in its
// available pool, shared pods with no load.
func checkQuiescent(t *testing.T, rdb redis.UniversalClient, a *allocator.Allocator, pods map[string]string) {
	t.Helper()
	ctx := context.Background()
	k := a.Keys()
	var leftovers []string
	for _, pattern := range []string{k.Call("*"), k.Lease("*"), k.PodCalls("*")} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		leftovers = append(leftovers, keys...)
	}
	if len(leftovers) > 0 {
		t.Errorf("keys left after all releases: %v", leftovers)
	}
	tiers := a.Config().Tiers.Tiers
	for pod, tier := range pods {
		avail := k.PoolAvailable(tier)
		if tiers[tier].Type == allocator.Shared {
			score, err := rdb.ZScore(ctx, avail, pod).Result()
			if err != nil || score != 0 {
				t.Errorf("shared pod %s: score %v (err %v), want 0 and present", pod, score, err)
			}
			continue
		}
		if !rdb.SIsMember(ctx, avail, pod).Val() {
			t.Errorf("exclusive pod %s is not back in %s", pod, avail)
		}
		if got := rdb.HGet(ctx, k.PodInfo(pod), "allocated_call_sid").Val(); got != "" {
			t.Errorf("pod %s still names call %q", pod, got)
		}
	}
}

// liveCheck runs inside Redis so that it sees one instant: each exclusive
// pod serves at most one call and is not available while it does; a shared
// pod serves at most max_concurrent calls, and its score equals the calls
// holding a per-call lease on it.
//
// KEYS[1] -> call key pattern; ARGV: prefix of call keys, then triples of
// pod, available key, max (0 = exclusive), per-call lease key.
const liveCheck = `
local perPod = {}
for _, ck in ipairs(redis.call('KEYS', KEYS[1])) do
  local pod = redis.call('HGET', ck, 'pod_name')
  if pod then perPod[pod] = (perPod[pod] or 0) + 1 end
end
local bad = {}
for i = 1, #ARGV, 4 do
  local pod, avail, max, calls = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2]), ARGV[i+3]
  local n = perPod[pod] or 0
  if max == 0 then
    if n > 1 then bad[#bad+1] = pod .. ' serves ' .. n .. ' calls' end
    if n == 1 and redis.call('SISMEMBER', avail, pod) == 1 then bad[#bad+1] = pod .. ' is available while serving a call' end
  else
    if n > max then bad[#bad+1] = pod .. ' serves ' .. n .. ' calls > ' .. max end
    local score = tonumber(redis.call('ZSCORE', avail, pod) or '-1')
    if score ~= n then bad[#bad+1] = pod .. ' has score ' .. score .. ' but ' .. n .. ' calls' end
    if redis.call('ZCARD', calls) ~= n then bad[#bad+1] = pod .. ' has ' .. redis.call('ZCARD', calls) .. ' per-call leases but ' .. n .. ' calls' end
  end
end
return bad
`

func checkLive(t *testing.T, rdb redis.UniversalClient, a *allocator.Allocator, pods map[string]string) {
	t.Helper()
	k := a.Keys()
	tiers := a.Config().Tiers.Tiers
	var args []any
	for pod, name := range pods {
		args = append(args, pod, k.PoolAvailable(name), tiers[name].MaxConcurrent, k.PodCalls(pod))
	}
	bad, err := rdb.Eval(context.Background(), liveCheck, []string{k.Call("*")}, args...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
