-- pod_failure.lua: record a failed dial, a pod lost mid-call or a failed
-- health probe, ejecting the pod from allocation on every replica unless
-- its tier is at max_ejection_percent (see mark_failed in lib/ejection.lua). Calls
-- are not touched: the media proxy releases or moves them itself.
--
-- ARGV[1] -> pod
-- ARGV[2] -> reason
-- ARGV[3] -> ejection backoff base in ms
-- ARGV[4] -> ejection backoff max in ms
-- ARGV[5] -> max ejection percent of a tier
--
-- Returns {ejected (0|1), probe_due_ms, failures}.

local ejected, due, failures = mark_failed(ARGV[1], ARGV[2], now_ms(), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]))
return {ejected, due, failures}
