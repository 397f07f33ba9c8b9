-- presence.lua: one replica's heartbeat, and its look at the data set's
-- epoch (lib/recovery.lua): every replica runs it about once a second.
--
-- KEYS[1] -> K.replicas()
-- ARGV[1] -> the replica's name
-- ARGV[2] -> the epoch it knows ("" none yet)
-- ARGV[3] -> the random part of a new epoch, stored if none is
-- ARGV[4] -> recovery hold in ms
-- ARGV[5] -> replica TTL in ms (0: no look at the other replicas)
-- ARGV[6] -> ended TTL in ms (0: no look for marks of the layout before)
-- ARGV[7] -> the hour of marks of the layout before to look at, in hours
--            before now's (lib/ended.lua's look_legacy; the replica turns
--            through the ended TTL, one hour a beat)
-- ARGV[8] -> the first of the 16 sets of compact marks whose marks past
--            the ended TTL this beat drops (lib/ended.lua's prune_marks;
--            the replica turns through them, 16 a beat)
-- then    -> calls this replica answered whose socket it has not seen
--
-- Returns {epoch, n, then the n calls given that are settled, then the
-- replicas whose beat is older than the TTL}: the epoch stored
-- now (a replica that knew another one re-asserts its calls, renew.lua,
-- before it takes this one as known), and those of the answered calls
-- whose socket was admitted (on any replica) or that ended: not this
-- replica's to write back any more. Nothing is settled when the epoch
-- changed: a missing call is then one to write back, not one that ended.
-- The stale replicas are the dead-replica check's first question (by
-- Redis' clock), answered in the same round trip as the beat: most beats
-- find none and the check then costs nothing more.

local now = now_ms()
local epoch = current_epoch(ARGV[2], ARGV[3], tonumber(ARGV[4]), now)
if not epoch then
  -- A fresh data set seen by a fresh replica: nothing to re-assert, so no
  -- hold; a replica that knew the old one still starts it (current_epoch).
  epoch = new_epoch(ARGV[3], now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
if tonumber(ARGV[6]) > 0 then
  look_legacy(now, tonumber(ARGV[6]), tonumber(ARGV[7]))
  prune_marks(tonumber(ARGV[8]), 16, tonumber(ARGV[6]), now)
end
local out = {epoch, 0}
if ARGV[2] == '' or epoch == ARGV[2] then
  for i = 9, #ARGV do
    local info = redis.call('HMGET', K.call(ARGV[i]), 'pod_name', 'media_claim')
    if not info[1] or info[2] then
      out[#out + 1] = ARGV[i]
    end
  end
end
out[2] = #out - 2
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))) do
    out[#out + 1] = name
  end
end
return out
