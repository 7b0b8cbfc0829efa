-- Renew leases of one job, each only while it still holds the caller's fencing token (a
-- lapsed lease, or one another run took over, is not renewed: its holder learns it lost it).
-- A renewal never shortens a lease: a call's claim checked before a request lives as long as
-- that request may (swarm.calls.session), whatever the heartbeat renews it with meanwhile.
--
-- KEYS[1..] leases: lease keys (strings holding a fencing token)
-- ARGV[1] ttl_ms: lease lifetime
-- ARGV[2..] tokens: the fencing token of each lease, in the order of KEYS
-- Returns one integer per key: 1 renewed, 0 lost.
local ttl = tonumber(ARGV[1])
local kept = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
    kept[i] = 1
  else
    kept[i] = 0
  end
end
return kept
