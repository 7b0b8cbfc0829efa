-- Lease a received task message for its delivery, unless a live run holds the lease.
--
-- A lease that is not set (lapsed, released, never taken) or that is a sweeper's hold (the
-- sweeper that sent this message again: swarm.jobs.takeover) is taken; a live run's is
-- left to it: this delivery duplicates the message that run is working on.
--
-- KEYS[1] lease: the task's lease key
-- ARGV[1] token: the delivery's fencing token
-- ARGV[2] ttl_ms: lease lifetime
-- ARGV[3] hold: the prefix of a sweeper's hold token
-- Returns 1 when the delivery holds the lease, 0 when a live run does.
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and string.sub(held, 1, #ARGV[3]) ~= ARGV[3] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
return 1
