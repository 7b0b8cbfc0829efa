-- Read a model's shared counters (no writes). Clock = Redis TIME (ms).
-- KEYS[1] state: hash
-- KEYS[2] leases: zset
-- KEYS[3] waiters: zset
-- KEYS[4] tenants: hash tenant -> "<recent tokens> <at ms> <weight>"
-- Returns {admitted, refused, rate_limited, expired, inflight, waiting, factor, pause ms,
-- pauses, now ms, tenants as a flat list of field, value} (factor, pause ms, now as strings).

local state, leases, waiters, tenants = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local v = redis.call('HMGET', state, 'admitted', 'refused', 'rate_limited', 'expired',
  'factor', 'pause_until', 'pauses')
local pause = math.max(0, tonumber(v[6] or '0') - now)
return {
  tonumber(v[1] or '0'), tonumber(v[2] or '0'), tonumber(v[3] or '0'), tonumber(v[4] or '0'),
  redis.call('ZCOUNT', leases, '(' .. now, '+inf'),
  redis.call('ZCOUNT', waiters, '(' .. now, '+inf'),
  v[5] or '1', string.format('%.3f', pause), tonumber(v[7] or '0'),
  string.format('%.3f', now), redis.call('HGETALL', tenants)
}
