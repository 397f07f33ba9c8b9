-- recovery.lua: the hold after Redis lost its data.

-- Recovery after Redis lost its data (restarted empty, flushed): K.epoch()
-- names the data set; a replica that remembers another value has calls
-- Redis no longer knows, and re-asserts them (renew.lua) while
-- K.recovering() holds every allocation back.

-- Starts the hold for a data set born at epoch ("<unix ms>-<random>"), to
-- last hold_ms from its birth: a replica that finds the epoch changed
-- after another replica (one with nothing to re-assert) created it holds
-- back allocations for what remains of the window, never longer.
local function start_hold(epoch, hold_ms, now)
  local born = tonumber(string.match(epoch, '^(%d+)-'))
  if hold_ms <= 0 or not born then
    return
  end
  local left = born + hold_ms - now
  if left > 0 then
    redis.call('SET', K.recovering(), epoch, 'PX', left, 'NX')
  end
end

-- Stores a new epoch, born now on Redis' clock (so that every replica
-- measures the hold alike), unless one appeared meanwhile; returns the one
-- stored.
local function new_epoch(random, now)
  local epoch = string.format('%.0f', now) .. '-' .. random
  if redis.call('SET', K.epoch(), epoch, 'NX') then
    redis.call('SET', K.epoch_seen(epoch), '1')
    return epoch
  end
  return redis.call('GET', K.epoch())
end

-- The epoch stored now, creating it (with candidate) when missing. known is
-- the epoch the asking replica remembers ("" when it never saw one: a fresh
-- process, which has no calls to re-assert) and candidate the random part
-- of a new one. A replica that knew one and finds none is the first to see
-- Redis emptied: it starts the hold. The second value says whether a hold
-- may have been started here.
-- deferred: allocations read the epoch only when their replica's is not the one Redis holds.
local function current_epoch(known, candidate, hold_ms, now)
  local epoch = redis.call('GET', K.epoch())
  if epoch then
    if known ~= '' and epoch ~= known then
      start_hold(epoch, hold_ms, now)
      return epoch, true
    end
    return epoch, false
  end
  if known == '' or candidate == '' then
    return nil, false
  end
  epoch = new_epoch(candidate, now)
  start_hold(epoch, hold_ms, now)
  return epoch, true
end

-- How long (ms) an allocation must wait before a pod may be offered: while
-- the hold lasts, and while the asking replica itself has not re-asserted
-- its calls (it knows another epoch). 0: go on. holding says whether
-- K.recovering() existed when the caller looked, seen whether
-- K.epoch_seen(known) did (nil: not known): with neither, a replica that
-- knows no epoch, or whose epoch is still Redis' one, goes on without
-- reading it (a fresh replica creates none here, and learns the epoch
-- from its heartbeat). hold_ms may be the text of the number: it is read
-- only past that first test.
local function recovery_wait(known, candidate, hold_ms, now, holding, seen)
  if holding == false and (known == '' or seen) then
    return 0
  end
  local epoch, started = current_epoch(known, candidate, tonumber(hold_ms) or 0, now)
  if seen == false and known ~= '' and epoch == known then
    -- An epoch an older edge stored, without its mark.
    redis.call('SET', K.epoch_seen(epoch), '1')
  end
  if holding ~= false or started then
    local left = redis.call('PTTL', K.recovering())
    if left > 0 then
      return left
    end
  end
  if known ~= '' and epoch and epoch ~= known then
    return 100
  end
  return 0
end
