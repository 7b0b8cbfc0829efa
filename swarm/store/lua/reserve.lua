-- Reserve a call's estimated cost against the job's budget, or refuse it.
-- Mirrors swarm.store.billing.admits(): refused when the budget is exhausted (unless
-- closing, i.e. the aggregation) or when spent + reserved + amount would pass the cap.
-- A refusal of a sub-agent marks the budget exhausted, so every later node is refused too.
--
-- KEYS[1] budget: hash of cap_nusd, spent_nusd, reserved_nusd, exhausted, res:<id> -> amount
-- ARGV[1] reservation_id
-- ARGV[2] amount_nusd
-- ARGV[3] closing: '1' for the aggregation
-- ARGV[4] ttl_s
-- Returns 1 when reserved (or already reserved under this id, or no cap), 0 when refused.
local cap = redis.call('HGET', KEYS[1], 'cap_nusd')
if not cap then
  return 1
end
local field = 'res:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], field) == 1 then
  return 1
end
local closing = ARGV[3] == '1'
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent_nusd') or '0')
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved_nusd') or '0')
local exhausted = redis.call('HEXISTS', KEYS[1], 'exhausted') == 1
if (exhausted and not closing) or spent + reserved + tonumber(ARGV[2]) > tonumber(cap) then
  if not closing then
    redis.call('HSET', KEYS[1], 'exhausted', '1')
  end
  return 0
end
redis.call('HINCRBY', KEYS[1], 'reserved_nusd', ARGV[2])
redis.call('HSET', KEYS[1], field, ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
