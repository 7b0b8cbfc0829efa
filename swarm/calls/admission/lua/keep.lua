-- Renew in-flight leases this worker process still holds (its heartbeat, every third of a
-- lease): each expires a lease from now, on this server's clock, unless it already expires
-- later (a booked slot). A lease no longer listed (finished, or purged once it expired while
-- its worker was frozen or dead) is not brought back.
--
-- KEYS[1] leases: zset lease -> expiry in ms
-- ARGV[1] lease_ms: lease lifetime
-- ARGV[2..] lease_ids: the ids of the leases to renew
-- Returns the number of leases renewed.
local now = redis.call('TIME')
local expiry = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', expiry, ARGV[i])
end
return renewed
