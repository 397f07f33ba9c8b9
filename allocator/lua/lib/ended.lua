-- ended.lua: ended calls' compact marks, and those of the layout before.

-- An ended call's compact mark: in a sorted set per shard of call ids
-- (K.ended_marks, keys.go's EndedMarksOf), the call id scored by when it
-- ended (unix ms) times 4 plus how (1 released, 2 expired, 3
-- unregistered), so that one ZSCORE tells whether and how the call ended
-- within the providers' retry horizon (allocator.ended_ttl), long after
-- its full record is gone. A mark older than the horizon counts for
-- nothing and is dropped by a later write to its shard. allocate and
-- release are handed their call's set as a key (keys.go computes the
-- shard, sparing Redis a SHA-1 per run); other scripts find it with
-- ended_mark_key. The constant is keys.go's EndedMarkShards.
local ENDED_MARK_SHARDS = 16384

-- The set of call_id's mark (keys.go's EndedMarksOf). The shard is text
-- ('%d' is several times cheaper than the floating point printf a number
-- in a key would cost).
local function ended_mark_key(call_id)
  local shard = tonumber(string.sub(redis.sha1hex(call_id), 1, 4), 16) % ENDED_MARK_SHARDS
  return K.ended_marks(string.format('%d', shard))
end

-- Marks call_id ended now in key (its ended_mark_key). One run in 16 (by
-- Redis' clock) also drops the set's marks past the horizon.
local function mark_ended(key, call_id, how, horizon_ms, now)
  if not horizon_ms or horizon_ms <= 0 then
    return
  end
  if now % 16 == 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', (now - horizon_ms) * 4))
  end
  local code = 1
  if how == 'expired' then
    code = 2
  elseif how == 'unregistered' then
    code = 3
  end
  redis.call('ZADD', key, string.format('%d', now * 4 + code), call_id)
end

-- Drops the marks past the horizon from n sets of marks, shard first on
-- (each replica's beat, presence.lua, turning through them): a set no
-- call ends into any more would keep its marks, and Redis their memory,
-- for ever; an emptied set is gone.
local function prune_marks(first, n, horizon_ms, now)
  local before = '(' .. string.format('%d', (now - horizon_ms) * 4)
  for shard = first, first + n - 1 do
    redis.call('ZREMRANGEBYSCORE', K.ended_marks(string.format('%d', shard % ENDED_MARK_SHARDS)), '-inf', before)
  end
end

-- The marks of the layout before: one hash per hour of end times
-- (ENDED_BUCKET_MS) and shard of call ids (keys.go's EndedBucket and
-- EndedShards), call id -> how, each hash expiring horizon_ms after its
-- hour. An edge that wrote them may still run (a rolling upgrade), and
-- its marks refuse replays until they expire: they are read while
-- K.ended_legacy() exists (the allocator sets it while such hashes do,
-- endedlayout.go).
local ENDED_BUCKET_MS, ENDED_SHARDS = 3600000, 1024

-- deferred: read only while marks of the layout before may exist.
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

-- How the call ended according to its mark in key (its ended_mark_key)
-- within the last horizon_ms, or nil. legacy says whether marks of the
-- layout before may exist (nil: look whether K.ended_legacy() does).
local function ended_mark(key, call_id, horizon_ms, now, legacy)
  if not horizon_ms or horizon_ms <= 0 then
    return nil
  end
  local score = tonumber(redis.call('ZSCORE', key, call_id) or '')
  if score and score >= (now - horizon_ms) * 4 then
    local code = score % 4
    if code == 2 then
      return 'expired'
    elseif code == 3 then
      return 'unregistered'
    end
    return 'released'
  end
  if legacy == nil then
    legacy = redis.call('EXISTS', K.ended_legacy()) == 1
  end
  if legacy then
    return legacy_ended_mark(call_id, horizon_ms, now)
  end
  return nil
end
