-- Task leases whose expiry passed, on this server's clock.
--
-- KEYS[1] index: sorted set "<job id>|task:<task id>" -> expiry in ms
-- ARGV[1] limit: most members to return
-- Returns the lapsed members, oldest first.
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms, 'LIMIT', 0, tonumber(ARGV[1]))
