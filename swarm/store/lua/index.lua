-- List task leases in the lapse index, scored by their expiry on this server's clock (so
-- workers whose clocks disagree still agree on when a lease lapsed).
--
-- KEYS[1] index: sorted set "<job id>|task:<task id>" -> expiry in ms
-- ARGV[1] ttl_ms: lease lifetime
-- ARGV[2] mode: 'add' (new leases) or 'renew' (only members still listed: a lapse a
--   sweeper took off stays off)
-- ARGV[3..] members
-- Returns the number of members written.
local now = redis.call('TIME')
local expiry = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
local written = 0
for i = 3, #ARGV do
  if ARGV[2] == 'add' then
    written = written + redis.call('ZADD', KEYS[1], expiry, ARGV[i])
  else
    written = written + redis.call('ZADD', KEYS[1], 'XX', 'CH', expiry, ARGV[i])
  end
end
return written
