-- presence.lua: one replica's heartbeat, and its look at the data set's
-- epoch (lib.lua): every replica runs it about once a second.
--
-- KEYS[1] -> K.replicas()
-- ARGV[1] -> the replica's name
-- ARGV[2] -> the epoch it knows ("" none yet)
-- ARGV[3] -> the random part of a new epoch, stored if none is
-- ARGV[4] -> recovery hold in ms
--
-- Returns {epoch}: the epoch stored now. A replica that knew another one
-- re-asserts its calls (renew.lua) before it takes this one as known.

local now = now_ms()
local epoch = current_epoch(ARGV[2], ARGV[3], tonumber(ARGV[4]), now)
if not epoch then
  -- A fresh data set seen by a fresh replica: nothing to re-assert, so no
  -- hold; a replica that knew the old one still starts it (current_epoch).
  epoch = new_epoch(ARGV[3], now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
return {epoch}
