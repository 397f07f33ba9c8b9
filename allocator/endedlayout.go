package allocator

import (
	"sync/atomic"
	"time"
)

// Marks of ended calls moved from hourly hashes (Keys.EndedCalls, one HGET
// per hour of allocator.ended_ttl to find one) to sorted sets by call id
// (Keys.EndedMarks, one ZSCORE). An older edge still running during a
// rolling upgrade, or before it, wrote hashes that must keep refusing
// replays until they expire: allocate.lua reads them too while
// Keys.EndedLegacy exists. Each replica's heartbeat (presence.lua) looks
// at one hour of them, all its 1,024 shards in one EXISTS, turning through
// the ended TTL one hour a beat (26 beats for the default 24 h), and keeps
// EndedLegacy alive until the newest it found expires. Until it has
// turned through them once, its allocations read them whatever
// EndedLegacy says (a replica that never beats, for ever). A mark an older
// replica writes for an hour the turn has passed is found at the next
// turn; meanwhile the call's tombstone (the call info TTL, an hour by
// default), which allocate reads first, refuses its replays.

// Marks of ended calls have no TTL (a set per shard of call ids, each mark
// written into it by a call's end): a mark past the ended TTL counts for
// nothing, and a later write to its set drops it (one in 16). A set no
// call ends into any more (an idle deployment) would keep its marks for
// ever: each beat also drops the old marks of marksPerBeat sets, turning
// through all EndedMarkShards of them in 1,024 beats (about 17 minutes at
// a beat a second), so a mark outlives the ended TTL by that at most.
const marksPerBeat = 16 // presence.lua's prune_marks

// endedLayout is where a replica's look at marks of the layout before is,
// and its turn through the sets of marks.
type endedLayout struct {
	beats atomic.Int64 // heartbeats that ran their look, since the start
}

// endedHours is how many hours of marks of the layout before a turn looks at:
// every bucket of the ended TTL, the current one included.
func endedHours(horizon time.Duration) int64 {
	return int64(horizon/EndedBucket) + 1
}

// next is the hour the next beat looks at, in hours before now's.
func (l *endedLayout) next(horizon time.Duration) int64 {
	return l.beats.Load() % endedHours(horizon)
}

// pruneFrom is the first set of marks the next beat prunes.
func (l *endedLayout) pruneFrom() int64 {
	return l.beats.Load() * marksPerBeat % EndedMarkShards
}

// beat notes a beat whose look ran.
func (l *endedLayout) beat() { l.beats.Add(1) }

// legacyMarksArg is allocate.lua's argument that says whether this
// replica must read marks of the layout before whatever EndedLegacy says:
// "1" until its beats have turned through the ended TTL once.
func (a *Allocator) legacyMarksArg() string {
	if a.endedLayout.beats.Load() < endedHours(a.current.Load().cfg.EndedTTL) {
		return "1"
	}
	return "0"
}
