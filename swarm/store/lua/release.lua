-- Release a reservation once the call ended (its real cost is in spent_nusd by then).
-- Idempotent: a second release of the same id changes nothing.
--
-- KEYS[1] budget: hash
-- ARGV[1] reservation_id
-- Returns 1 when released now, 0 when there was nothing to release.
local field = 'res:' .. ARGV[1]
local amount = redis.call('HGET', KEYS[1], field)
if not amount then
  return 0
end
redis.call('HDEL', KEYS[1], field)
redis.call('HINCRBY', KEYS[1], 'reserved_nusd', '-' .. amount)
return 1
