-- ended.lua: ended calls' compact marks, and those of the layout before.

-- An ended call's compact mark (K.ended_marks, keys.go): in a sorted set
-- per shard of call ids, the call id scored by when it ended (unix ms) times
-- 4 plus how (ENDED_HOW), so that one ZSCORE tells whether and how the call
-- ended within the providers' retry horizon (allocator.ended_ttl), long
-- after its full record is gone. A mark older than the horizon counts for
-- nothing and is dropped by a later write to its shard. The constant is
-- keys.go's EndedMarkShards.
local ENDED_MARK_SHARDS = 16384
local ENDED_HOW = {released = 1, expired = 2, unregistered = 3}
local ENDED_HOW_NAME = {[0] = 'released', 'released', 'expired', 'unregistered'}

-- The shard of a call's mark (keys.go's EndedMarkShard), and whether a
-- write of this call's mark trims its shard: one call in 16, by a hex
-- digit of the hash the shard does not use. The shard is text ('%d' is
-- several times cheaper than the floating point printf a number in a
-- key would cost).
local function ended_mark_shard(call_id)
  local h = call_sha1(call_id)
  return string.format('%d', tonumber(string.sub(h, 1, 4), 16) % ENDED_MARK_SHARDS), string.sub(h, 5, 5) == '0'
end

local function mark_ended(call_id, how, horizon_ms, now)
  if not horizon_ms or horizon_ms <= 0 then
    return
  end
  local shard, trim = ended_mark_shard(call_id)
  local key = K.ended_marks(shard)
  if trim then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', (now - horizon_ms) * 4))
  end
  redis.call('ZADD', key, string.format('%d', now * 4 + (ENDED_HOW[how] or 0)), call_id)
end

-- The marks of the layout before: one hash per hour of end times
-- (ENDED_BUCKET_MS) and shard of call ids (keys.go's EndedBucket and
-- EndedShards), call id -> how, each hash expiring horizon_ms after its
-- hour. An edge that wrote them may still run (a rolling upgrade), and
-- its marks refuse replays until they expire: they are read while
-- K.ended_legacy() exists (the allocator sets it while such hashes do,
-- endedlayout.go).
local ENDED_BUCKET_MS, ENDED_SHARDS = 3600000, 1024

local function legacy_ended_mark(call_id, horizon_ms, now)
  local shard = tonumber(string.sub(redis.sha1hex(call_id), 1, 4), 16) % ENDED_SHARDS
  local oldest = math.floor((now - horizon_ms) / ENDED_BUCKET_MS)
  for bucket = math.floor(now / ENDED_BUCKET_MS), oldest, -1 do
    local how = redis.call('HGET', K.ended_calls(bucket .. ':' .. shard), call_id)
    if how then
      return how
    end
  end
  return nil
end

-- Looks at one hour of marks of the layout before, all its shards in one
-- EXISTS: the hour back hours before now's (presence.lua, each replica's
-- beat, one hour a beat). While any exists, K.ended_legacy() lasts until
-- that hour's hashes expire, and a minute for the clocks.
local function look_legacy(now, horizon_ms, back)
  local bucket = math.floor(now / ENDED_BUCKET_MS) - back
  local keys = {}
  for shard = 0, ENDED_SHARDS - 1 do
    keys[shard + 1] = K.ended_calls(bucket .. ':' .. shard)
  end
  if redis.call('EXISTS', unpack(keys)) == 0 then
    return
  end
  local untl = string.format('%.0f', (bucket + 1) * ENDED_BUCKET_MS + horizon_ms + 60000)
  if (tonumber(redis.call('GET', K.ended_legacy()) or '0') or 0) < tonumber(untl) then
    redis.call('SET', K.ended_legacy(), untl)
    redis.call('PEXPIREAT', K.ended_legacy(), untl)
  end
end

-- How the call ended according to its mark within the last horizon_ms, or
-- nil. legacy says whether marks of the layout before may exist (nil: look
-- whether K.ended_legacy() does).
local function ended_mark(call_id, horizon_ms, now, legacy)
  if not horizon_ms or horizon_ms <= 0 then
    return nil
  end
  local score = tonumber(redis.call('ZSCORE', K.ended_marks((ended_mark_shard(call_id))), call_id) or '')
  if score and score >= (now - horizon_ms) * 4 then
    return ENDED_HOW_NAME[score % 4]
  end
  if legacy == nil then
    legacy = redis.call('EXISTS', K.ended_legacy()) == 1
  end
  if legacy then
    return legacy_ended_mark(call_id, horizon_ms, now)
  end
  return nil
end

