-- Reopen a finished job for `swarm resume`: drop the report and the cancel flag, write
-- the (possibly re-budgeted) spec, set the cap from it, forget the budget's exhaustion and
-- any reservation left by a crashed run, and count the resume (its number keeps the new
-- Celery task ids unique). Spent money, the ledger and stored answers are kept.
--
-- KEYS[1] report
-- KEYS[2] cancel: flag
-- KEYS[3] budget: hash
-- KEYS[4] resumes: counter
-- KEYS[5] spec
-- KEYS[6] revision: the spec's revision (swarm.store.spec_cache)
-- ARGV[1] cap_nusd: '' for no cap
-- ARGV[2] spec_json
-- ARGV[3] spec_rev
-- ARGV[4] ttl_s
-- Returns the resume's number (1 for the first resume).
redis.call('DEL', KEYS[1], KEYS[2])
local fields = redis.call('HKEYS', KEYS[3])
for _, field in ipairs(fields) do
  if string.sub(field, 1, 4) == 'res:' or field == 'exhausted' or field == 'cap_nusd' then
    redis.call('HDEL', KEYS[3], field)
  end
end
redis.call('HSET', KEYS[3], 'reserved_nusd', '0')
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[3], 'cap_nusd', ARGV[1])
end
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('SET', KEYS[5], ARGV[2], 'EX', ARGV[4])
redis.call('SET', KEYS[6], ARGV[3], 'EX', ARGV[4])
local n = redis.call('INCR', KEYS[4])
redis.call('EXPIRE', KEYS[4], ARGV[4])
return n
