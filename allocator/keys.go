package allocator

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix is the predecessor's key prefix. A deployment on Redis Cluster
// uses a hash-tagged prefix such as "{voice}:" so that every key of edge lands
// in one slot and the scripts may touch keys they derive at run time.
const DefaultPrefix = "voice:"

// Keys is the whole Redis key schema of edge: every key any part of edge reads
// or writes is built here and nowhere else. The names and types of the keys
// marked "seeds" are the predecessor's and keep their meaning, so that a
// predecessor deployment can switch to edge on the same Redis; the ones marked
// "edge" are additions.
//
// The Lua scripts get the same functions, generated from these methods (see
// luaKeyBuilders), so the schema has a single source.
type Keys struct {
	prefix string
}

// NewKeys returns the schema under prefix ("" means DefaultPrefix).
func NewKeys(prefix string) Keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Keys{prefix: prefix}
}

// Prefix is the prefix every key starts with.
func (k Keys) Prefix() string { return k.prefix }

// HashTag is the Redis Cluster hash tag of a key or prefix ("voice" for
// "{voice}:"), or "" when it has none: Cluster hashes only the tag, so every
// key under a tagged prefix maps to the tag's one slot.
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return ""
	}
	return key[open+1 : open+1+end]
}

// TierConfig (seeds) STRING: the canonical tier config JSON envelope
// {"tiers":{...},"default_chain":[...]}. Bootstrapped with SETNX, read by
// every replica, written by operators through the admin API.
func (k Keys) TierConfig() string { return k.prefix + "tier:config" }

// PoolAvailable (seeds) SET of pod names for an exclusive tier (SPOP to
// allocate), or ZSET of pod name -> calls in progress for a shared tier.
func (k Keys) PoolAvailable(tier string) string { return k.prefix + "pool:" + tier + ":available" }

// PoolAssigned (seeds) SET of every pod assigned to a tier, busy or not.
func (k Keys) PoolAssigned(tier string) string { return k.prefix + "pool:" + tier + ":assigned" }

// MerchantPods (seeds) SET of a merchant's dedicated pods that are free.
func (k Keys) MerchantPods(merchant string) string {
	return k.prefix + "merchant:" + merchant + ":pods"
}

// MerchantAssigned (seeds) SET of every pod dedicated to a merchant.
func (k Keys) MerchantAssigned(merchant string) string {
	return k.prefix + "merchant:" + merchant + ":assigned"
}

// MerchantConfig (seeds) HASH of merchant id -> JSON
// {"tier":"gold","pool":"acme","fallback":["standard","basic"]}.
func (k Keys) MerchantConfig() string { return k.prefix + "merchant:config" }

// MerchantCalls (edge) ZSET of call id -> lease expiry (unix ms) of a
// merchant's live calls: the count a merchant's max_calls cap is
// checked against, inside allocate.lua. Every script that creates, renews
// or ends a call keeps it (allocate, renew, release, failover, sweep,
// unregister, sync); an entry whose lease expired is a dead call and is not
// counted, so a call ended by a path that does not know the set (the
// predecessor's release) stops counting when its lease would have run out,
// and is dropped at a later count (every renewal, one allocation in 16,
// every capped admission). The key has no TTL: it goes when the
// merchant's last call ends (a TTL an older edge set lapses once, and the
// renewals put back what it took).
func (k Keys) MerchantCalls(merchant string) string {
	return k.prefix + "merchant:" + merchant + ":calls"
}

// RateMerchant (edge) HASH tokens, at (unix ms): a merchant's token bucket
// of the admission rate limit (admission.rate.merchant_*), taken
// by allocate.lua; it expires once it would be full again.
func (k Keys) RateMerchant(merchant string) string { return k.prefix + "rate:merchant:" + merchant }

// RateSource (edge) HASH tokens, at (unix ms): a source's token bucket
// (admission.rate.source_*), the source being a call's creator
// ("provider:twilio", "token:<name>").
func (k Keys) RateSource(source string) string { return k.prefix + "rate:source:" + source }

// DemandPending (edge) ZSET of call id -> expiry (unix ms): the calls
// refused for want of a pod (no_pods, all_draining, at_capacity) whose
// chain ends in tier, each counted in the demand signal (demand.go) until
// DemandWindow after its last refusal. allocate.lua adds a call only
// within its merchant's bound (DemandMerchant). The key expires with its
// latest entry.
func (k Keys) DemandPending(tier string) string { return k.prefix + "demand:pending:" + tier }

// DemandMerchant (edge) ZSET of call id -> expiry (unix ms): the same
// refused calls by merchant, whatever their tier, so that a merchant's
// count stops at its max_calls less its live calls (or
// admission.demand.uncapped_calls without a cap). Merchant "" holds the
// calls whose merchant has no config, or that name none: one bound for
// every made-up merchant id.
func (k Keys) DemandMerchant(merchant string) string { return k.prefix + "demand:merchant:" + merchant }

// WaitQueue (edge) LIST of the call ids (tickets) of a merchant's calls
// waiting for capacity (admission.wait), oldest first: FIFO
// within the merchant. Merchant "" (calls without one) has its own queue.
// A queue is never empty while it exists and its merchant is in WaitRing.
func (k Keys) WaitQueue(merchant string) string { return k.prefix + "wait:q:" + merchant }

// WaitRing (edge) LIST of the merchants that have waiting calls, in the
// order they are served: a merchant served moves to the tail, so one
// merchant's burst of waiters and another's single call alternate.
func (k Keys) WaitRing() string { return k.prefix + "wait:ring" }

// WaitDeadline (edge) ZSET of waiting call id -> its deadline (unix ms,
// Redis' clock): every waiter in one place, so that a waiter whose replica
// died is dropped once its deadline passes, by whichever script looks next.
func (k Keys) WaitDeadline() string { return k.prefix + "wait:deadline" }

// WaitRecent (edge) STRING "1" while a call may be waiting: each wait
// started makes it last at least that wait's ticket's life (its budget
// and a minute). A release reads it with its pod's keys and looks for
// waiters to hand the pod to only while it exists, which spares every
// release a command when nobody waits.
func (k Keys) WaitRecent() string { return k.prefix + "wait:recent" }

// WaitTicket (edge) HASH of one waiting call: merchant, creator, account
// (when the provider has several), traceparent, lease_ms and info_ms (what
// its allocation writes), cap (the merchant's max_calls when it started
// waiting, "" for none), plan (JSON
// {"c":[chain steps],"t":{step:{type,max,pack}}}: the chain and tiers it
// waits for) and deadline; served ("1") once a script gave it a pod, until
// its allocate picks the pod up. Expires a minute after its deadline.
func (k Keys) WaitTicket(callID string) string { return k.prefix + "wait:ticket:" + callID }

// WaitWake (edge) Pub/Sub channel, not a key: the scripts that give pods
// to waiters publish the served call ids on it (space-separated), so that
// the replica where each one waits answers it at once.
func (k Keys) WaitWake() string { return k.prefix + "wait:wake" }

// MerchantPools (edge) SET of merchant ids that have a dedicated pool, so
// status and sweeps can find every merchant pool without scanning keys.
func (k Keys) MerchantPools() string { return k.prefix + "merchant:pools" }

// PodTier (seeds) STRING: the tier a pod belongs to, "gold" or
// "merchant:<id>". Its existence is what makes a pod known to edge.
func (k Keys) PodTier(pod string) string { return k.prefix + "pod:tier:" + pod }

// PodInfo (seeds) HASH: status ("available", "allocated", "draining"),
// allocated_call_sid, allocated_at, released_at, source_pool; edge adds
// unready ("1" while the pod source reports the pod not ready: it takes no
// new calls but keeps its calls), pinned ("1" when the source pins the
// pod's tier: rebalancing leaves it there) and load_deficit_at (migration
// mode: when the sweep first saw a shared pod's score below its live
// calls; sweep.lua raises it only once that lasts). For an exclusive
// pod allocated_call_sid names the call that owns it: release and renew are
// fenced on it.
func (k Keys) PodInfo(pod string) string { return k.prefix + "pod:" + pod }

// PodDraining (seeds) STRING "true" with the draining TTL: the pod takes no
// new calls and is not returned to its pool.
func (k Keys) PodDraining(pod string) string { return k.prefix + "pod:draining:" + pod }

// PodMetadata (seeds) HASH of pod name -> JSON {"name":...,"tier":...} (edge
// adds "address"). Its fields are the list of every registered pod.
func (k Keys) PodMetadata() string { return k.prefix + "pod:metadata" }

// Lease (seeds) STRING: the call id holding the pod, with the lease TTL. On an
// exclusive pod it is the call's lease; on a shared pod it says that some call
// is live (the per-call leases are in PodCalls).
func (k Keys) Lease(pod string) string { return k.prefix + "lease:" + pod }

// PodCalls (edge) ZSET of call id -> lease expiry (unix ms) of the calls on a
// shared pod: one lease per call, so a slot whose call died without a release
// can be found and reclaimed.
func (k Keys) PodCalls(pod string) string { return k.prefix + "pod:calls:" + pod }

// PredecessorPodCalls (predecessor) SET of the call ids the predecessor
// allocated to a pod: its allocation adds the call and its release removes
// it, and its reconciler reads the set when the pod dies. The seeds do not
// document it; the predecessor's binary writes it. edge never adds to it;
// its release removes the call it ends, so that a call ended through edge
// does not stay in the set for the predecessor's reconciler to find, and
// its unregister ends every call the set lists and deletes it, as that
// reconciler does.
func (k Keys) PredecessorPodCalls(pod string) string { return k.prefix + "pod:" + pod + ":calls" }

// Call (seeds) HASH: pod_name, source_pool, merchant_id, allocated_at (unix
// seconds); edge adds allocated_at_ms (the same moment in unix ms, for the
// timeline), pool_type ("exclusive" or "shared"), creator (who
// created the call, e.g. "provider:twilio" or "token:<name>", written by
// allocate: only the creator may learn the call's media URL from a repeat
// allocate), account (the provider account whose webhook created the call,
// a label such as a Twilio AccountSid, written by allocate, or by a wait's
// hand-off from its ticket, only when the provider has several accounts:
// release.lua ends such a call for that account's status callbacks only,
// a repeat from another account learns nothing, and renew.lua writes it
// back with the call) and media_claim (the identity of the one media
// socket admitted for the call, written by claim.lua and removed by
// unclaim.lua; it ends with the hash); claim.lua also stamps socket_opened_at (unix ms) and
// socket_replica when a socket is first admitted, and move_call.lua keeps
// moved_from ("|a|b|", the pods the call left); release.lua keeps ended_by
// and provider_ended_at when the call's provider said it ended while its
// socket was open (renew.lua then renews it no more, allocate.lua answers a
// replay "ended"); unclaim.lua counts in
// failed_handshakes the sockets that reached no pod and left the call to
// the provider's own retry (claim.lua returns it); resumable (the media
// claim of a socket that moves the call when its pod dies or leaves,
// written by resumable.lua, never kept in the tombstone), pod_gone
// (unregister.lua: the pod left and the call is that socket's to move),
// resumptions and resumed_at (unix ms; move_call.lua counts the moves of a
// call whose socket was relaying); traceparent (the W3C
// trace context of the webhook that allocated the call, written by allocate
// only when tracing is on, read by claim.lua so the media socket's span
// links to the webhook's trace); edge_pod (the pod edge gave the call,
// written with pod_name by allocate, the waiters' hand-off, move_call and
// renew's write-back: while the two agree the record is edge's alone, as
// the predecessor never stores its pod over a record edge wrote, and
// release.lua skips its checks for records both routers wrote). Expires
// after the call info TTL, which renewals push forward while the call's
// socket lives.
func (k Keys) Call(callID string) string { return k.prefix + "call:" + callID }

// CallEnded (edge) HASH tombstone of an ended call, its record for the call
// timeline (GET /api/v1/calls/{call_sid}), with the call info TTL: the call
// info's fields but media_claim, then how ("released", "expired" or
// "unregistered"), ended_at (unix ms) and, from a release, released_by
// ("socket", "api", "unanswered" or "provider"), ended_by and
// provider_ended_at (unix ms) when a provider's status callback said the
// call ended (EndByProvider; on the call info already while its socket was
// open), and, when a media socket's end released it, socket_end
// (socket_close, drain, lease_lost, pod_lost, failover), closed_by,
// close_code, socket_closed_at (unix ms), messages_in/out and bytes_in/out
// (in: client to pod). Written by release, sweep, sync and unregister in the
// same step that deletes the call info (lua/lib/record.lua's end_call_record); allocate
// refuses a call that has one (a late or replayed webhook gets a hangup, not
// a pod), and after it expired a call whose compact mark (EndedMarks) lives
// on. An edge older than the call timeline wrote it as a STRING holding how:
// allocate and Timeline read both. Not under "call:" so that nothing listing
// call info by pattern sees it. The predecessor's release writes none: a call
// it ended can be allocated again by a replayed webhook, as before.
func (k Keys) CallEnded(callID string) string { return k.prefix + "call_ended:" + callID }

// EndedMarkShards is how many EndedMarks sets the marks of ended calls are
// spread over, by the first 16 bits of the SHA-1 of the call id (lua/lib/ended.lua
// has the same constant). 16,384 keep each set near 64 marks at a million
// calls a day under the default 24 h ended_ttl, within Redis' compact
// (listpack) encoding of small sorted sets up to about two million a day
// (zset-max-listpack-entries, 128 by default).
const EndedMarkShards = 16384

// EndedMarks (edge) ZSET of call id -> when it ended (unix ms) times 4
// plus how (1 "released", 2 "expired", 3 "unregistered"): the compact
// marks of ended calls whose ids fall in one shard (EndedMarkShard, in
// decimal; EndedMarksOf).
// lua/lib/record.lua's end_call_record writes the mark with the call's tombstone
// (CallEnded); allocate refuses a call whose mark is younger than
// allocator.ended_ttl with one ZSCORE, long after its tombstone (the call
// info TTL) is gone. A mark past ended_ttl counts for nothing and is
// dropped by a later write to its set (one write in 16 trims); the sets
// have no TTL, so at most one ended_ttl of marks is ever kept. About the
// bytes of a hash field per call (docs/security.md).
func (k Keys) EndedMarks(shard string) string { return k.prefix + "ended_marks:" + shard }

// EndedMarksOf is the EndedMarks set that holds the mark of callID.
func (k Keys) EndedMarksOf(callID string) string {
	return k.EndedMarks(strconv.Itoa(EndedMarkShard(callID)))
}

// EndedMarkShard is the shard of a call id's mark: the first 16 bits of
// the SHA-1 of the id, modulo EndedMarkShards (redis.sha1hex in lua/lib/ended.lua).
func EndedMarkShard(callID string) int {
	sum := sha1.Sum([]byte(callID))
	return int(binary.BigEndian.Uint16(sum[:2])) % EndedMarkShards
}

// The layout of the marks before EndedMarks (EndedCalls): one hash per
// EndedBucket of end times and EndedShard of call ids. lua/lib/ended.lua has
// the same constants.
const (
	EndedBucket = time.Hour
	EndedShards = 1024
)

// EndedCalls (edge, the layout before EndedMarks) HASH of call id -> how
// it ended: the marks an older edge wrote, of the calls that ended within
// one EndedBucket and fall in one shard of call ids (slot
// "<bucket>:<shard>", see EndedCallsOf); each hash expires
// allocator.ended_ttl after its bucket ends. edge writes none; allocate
// reads them, one HGET per hour of ended_ttl, only while EndedLegacy
// exists, so that a call an older replica ended stays ended through a
// rolling upgrade.
func (k Keys) EndedCalls(slot string) string { return k.prefix + "ended:" + slot }

// EndedCallsOf is the EndedCalls hash that holds the mark of callID if an
// older edge marked it ended at at.
func (k Keys) EndedCallsOf(callID string, at time.Time) string {
	bucket := at.UnixMilli() / EndedBucket.Milliseconds()
	return k.EndedCalls(strconv.FormatInt(bucket, 10) + ":" + strconv.Itoa(EndedShard(callID)))
}

// EndedShard is the shard of a call id's mark in the layout before: the
// first 16 bits of the SHA-1 of the id, modulo EndedShards.
func EndedShard(callID string) int {
	sum := sha1.Sum([]byte(callID))
	return int(binary.BigEndian.Uint16(sum[:2])) % EndedShards
}

// EndedLegacy (edge) STRING, the unix ms it expires at, with that expiry:
// EndedCalls hashes (marks of an older edge) may exist until then, so
// allocate reads them too. Each replica's heartbeat looks at one hour of
// such hashes (presence.lua, endedlayout.go) and pushes the expiry to when
// the newest one it found expires, and a minute.
func (k Keys) EndedLegacy() string { return k.prefix + "ended_marks:legacy" }

// Nonce (edge) STRING "1" with a PX TTL of providers.nonce_ttl: a nonce a
// provider sent once (Plivo's V3 nonce), whose signature verified, seen
// by some replica (nonce.go's FirstUse, SET NX). scope is the provider;
// digest the nonce's SHA-256, truncated (NonceDigest), so that the key's
// size does not depend on the provider's nonce.
func (k Keys) Nonce(scope, digest string) string { return k.prefix + "nonce:" + scope + ":" + digest }

// LeaderLock (edge) STRING: holder identity and fencing token of the Redis
// leader lock, used when pods come from a static list (no Kubernetes Lease).
func (k Keys) LeaderLock() string { return k.prefix + "leader:lock" }

// LeaderFence (edge) STRING counter: incremented on every leadership
// acquisition, the fencing token of the Redis leader lock.
func (k Keys) LeaderFence() string { return k.prefix + "leader:fence" }

// LeaseFence (edge) STRING "lease/<identity>/<created>/<uid>/<transitions>":
// the fencing token of the leader elected through the Kubernetes Lease,
// written when its leadership starts (ordered by the Lease object's
// creationTimestamp, then its leaseTransitions, so it only grows, even
// across a recreated Lease) and checked by every leader script like the
// Redis lock's value.
func (k Keys) LeaseFence() string { return k.prefix + "leader:lease_fence" }

// MerchantTargets (edge) HASH of merchant pool id -> target pod count: the
// dedicated pools that tier assignment fills before the default chain.
func (k Keys) MerchantTargets() string { return k.prefix + "merchant:targets" }

// Ejected (edge) ZSET of pod name -> when its next health probe is due
// (unix ms): the pods taken out of allocation on every replica because
// dials to them failed (passive health, move_call.lua and pod_failure.lua).
// An ejected pod keeps its pool membership and its calls;
// allocate only skips it. It leaves the set when a probe succeeds
// (reinstate.lua) or the pod source replaces it (sync.lua with a new
// address, unregister.lua). Its pod info (PodInfo) carries failures (the
// consecutive failed dials and probes, which grow the backoff),
// ejected_reason and ejected_at (unix ms).
func (k Keys) Ejected() string { return k.prefix + "pods:ejected" }

// ACMECache (edge) STRING: one autocert.Cache entry of the ACME manager
// (package acme), named by autocert: "<host>" (PEM private key then
// certificate chain), "<host>+token" (a tls-alpn-01 challenge certificate,
// with a TTL), "<token>+http-01" (an http-01 challenge answer, with a TTL)
// and "acme_account+key" (the ACME account's private key). Certificates and
// the account key have no TTL: an expired certificate is replaced, never
// served. These values are private keys: Redis must be reachable by edge only.
func (k Keys) ACMECache(name string) string { return k.prefix + "acme:cache:" + name }

// ACMELock (edge) STRING: the issuance lock of one host, a random token with
// a PX TTL of tls.acme.issue_timeout plus a margin while one replica talks
// to the CA, or "failed" with the retry backoff's PX after a failed
// issuance, so that no replica asks the CA again before then.
func (k Keys) ACMELock(host string) string { return k.prefix + "acme:lock:" + host }

// ACMEIssued (edge) Pub/Sub channel, not a key: "ok" or "failed" is
// published on it when an issuance for the host ends, waking the replicas
// that wait for the certificate instead of asking the CA.
func (k Keys) ACMEIssued(host string) string { return k.prefix + "acme:issued:" + host }

// Epoch (edge) STRING: the generation of this Redis data set, "<unix ms>-<random>",
// written once by the first replica that finds it missing (SET NX). Every
// replica remembers the value it last saw: a different one means Redis lost
// its data since (restarted empty, or flushed), so the replica re-asserts the
// calls whose sockets it relays (renew.lua) before any pod is offered again.
// No TTL.
func (k Keys) Epoch() string { return k.prefix + "epoch" }

// EpochSeen (edge) STRING "1", no TTL: the Epoch named exists. Written
// with a new epoch (lua/lib/recovery.lua's new_epoch), or by the first allocate that
// finds the epoch it knows stored without one (an older edge created it),
// so that allocate tells "Redis still holds the data set this replica
// knows" by an EXISTS beside its others instead of reading Epoch. It goes
// with the data set; one a hand deleted Epoch left behind names an epoch
// whose data is still there.
func (k Keys) EpochSeen(epoch string) string { return k.prefix + "epoch_seen:" + epoch }

// Recovering (edge) STRING, the new Epoch, with a PX TTL of
// allocator.recovery_hold: while it exists Redis has just lost its data and
// the replicas are re-asserting their live calls, so allocate.lua and
// move_call.lua give no pod (a busy exclusive pod would look free).
func (k Keys) Recovering() string { return k.prefix + "recovering" }

// Replicas (edge) ZSET of replica name -> its last heartbeat (unix ms,
// Redis' clock; presence.lua). A replica whose heartbeat is older than
// allocator.replica_ttl and that holds no connection to Redis is dead: the
// leader ends the calls whose sockets it held (orphans.lua). A replica of an
// edge without heartbeats never appears here, so its calls are never judged.
func (k Keys) Replicas() string { return k.prefix + "replicas" }

// ReplicaCalls (edge) SET of the call ids whose media socket a replica
// admitted (claim.lua adds, the end of the call or of the claim removes),
// and of the calls it answered (allocate.lua adds; the call info's
// answered_by names it): what the leader ends when that replica dies. An entry may outlive its
// call by a script that does not know the set; the call info's
// socket_replica is checked before anything is ended.
func (k Keys) ReplicaCalls(replica string) string { return k.prefix + "replica:" + replica + ":calls" }

// luaKey is a key builder as the scripts see it: K.<name>(a) is before ..
// a .. after; K.<name>() (no argument) is before.
type luaKey struct {
	arg           bool
	before, after string
}

// luaKeys gives the scripts the key builders, by the name Lua calls them
// (K.<name>). Each is derived from the Go method by calling it with a
// placeholder argument, so the scripts cannot drift from this file; the
// script builder writes each call out as the key's string, or a
// concatenation (scriptlib.go's inlineKeys).
func (k Keys) luaKeys() map[string]luaKey {
	const arg = "\x00"
	oneArg := []struct {
		name string
		fn   func(string) string
	}{
		{"pool_available", k.PoolAvailable},
		{"pool_assigned", k.PoolAssigned},
		{"merchant_pods", k.MerchantPods},
		{"merchant_assigned", k.MerchantAssigned},
		{"merchant_calls", k.MerchantCalls},
		{"rate_merchant", k.RateMerchant},
		{"rate_source", k.RateSource},
		{"demand_pending", k.DemandPending},
		{"demand_merchant", k.DemandMerchant},
		{"pod_tier", k.PodTier},
		{"pod_info", k.PodInfo},
		{"pod_draining", k.PodDraining},
		{"lease", k.Lease},
		{"pod_calls", k.PodCalls},
		{"predecessor_pod_calls", k.PredecessorPodCalls},
		{"call", k.Call},
		{"call_ended", k.CallEnded},
		{"ended_calls", k.EndedCalls}, // argument: bucket .. ":" .. shard
		{"ended_marks", k.EndedMarks}, // argument: the shard
		{"wait_queue", k.WaitQueue},
		{"wait_ticket", k.WaitTicket},
		{"replica_calls", k.ReplicaCalls},
		{"epoch_seen", k.EpochSeen},
	}
	noArg := []struct {
		name string
		fn   func() string
	}{
		{"tier_config", k.TierConfig},
		{"merchant_config", k.MerchantConfig},
		{"merchant_pools", k.MerchantPools},
		{"pod_metadata", k.PodMetadata},
		{"merchant_targets", k.MerchantTargets},
		{"leader_lock", k.LeaderLock},
		{"lease_fence", k.LeaseFence},
		{"ejected", k.Ejected},
		{"wait_ring", k.WaitRing},
		{"wait_deadline", k.WaitDeadline},
		{"wait_recent", k.WaitRecent},
		{"wait_wake", k.WaitWake},
		{"epoch", k.Epoch},
		{"recovering", k.Recovering},
		{"replicas", k.Replicas},
		{"ended_legacy", k.EndedLegacy},
	}
	out := make(map[string]luaKey, len(oneArg)+len(noArg))
	for _, f := range oneArg {
		before, after, _ := strings.Cut(f.fn(arg), arg)
		out[f.name] = luaKey{arg: true, before: before, after: after}
	}
	for _, f := range noArg {
		out[f.name] = luaKey{before: f.fn()}
	}
	return out
}

// luaQuote quotes s as a Lua string literal; every byte outside printable
// ASCII, quotes and backslashes are written as decimal escapes.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			fmt.Fprintf(&b, "\\%03d", c)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
