-- presence.lua: one replica's heartbeat, and its look at the data set's
-- epoch (lib.lua): every replica runs it about once a second.
--
-- KEYS[1] -> K.replicas()
-- ARGV[1] -> the replica's name
-- ARGV[2] -> the epoch it knows ("" none yet)
-- ARGV[3] -> the random part of a new epoch, stored if none is
-- ARGV[4] -> recovery hold in ms
-- then    -> calls this replica answered whose socket it has not seen
--
-- Returns {epoch, then the calls given that are settled}: the epoch stored
-- now (a replica that knew another one re-asserts its calls, renew.lua,
-- before it takes this one as known), and those of the answered calls
-- whose socket was admitted (on any replica) or that ended: not this
-- replica's to write back any more. Nothing is settled when the epoch
-- changed: a missing call is then one to write back, not one that ended.

local now = now_ms()
local epoch = current_epoch(ARGV[2], ARGV[3], tonumber(ARGV[4]), now)
if not epoch then
  -- A fresh data set seen by a fresh replica: nothing to re-assert, so no
  -- hold; a replica that knew the old one still starts it (current_epoch).
  epoch = new_epoch(ARGV[3], now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
local out = {epoch}
if ARGV[2] == '' or epoch == ARGV[2] then
  for i = 5, #ARGV do
    local info = redis.call('HMGET', K.call(ARGV[i]), 'pod_name', 'media_claim')
    if not info[1] or info[2] then
      out[#out + 1] = ARGV[i]
    end
  end
end
return out
