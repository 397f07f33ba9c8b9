-- clock.lua: Redis' clock and the caller's deadline.
--
-- The files of lua/lib are the parts of the scripts' library, one concern
-- each. scripts.go builds a script from the parts scriptParts names for it,
-- and of those only the definitions the script reaches, in the order
-- partOrder gives: a definition uses only those of its own part above it
-- and of parts before its own.

-- Redis' own clock, so that every replica writes lease expiries on one clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether a script whose caller gave up at stale_after (unix ms as a
-- string; "0" or absent: never) reaches Redis too late to change anything
-- (a pause, a partition that heals: its webhook was answered "cannot
-- serve", its socket refused).
local function stale(stale_after, now)
  local at = tonumber(stale_after or '0') or 0
  return at > 0 and now > at
end


