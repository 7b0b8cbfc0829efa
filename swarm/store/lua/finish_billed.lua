-- Record a node's billed answer and store its envelope, in one round trip: record.lua's
-- work (count the call once by its id, store its answer unless the run lost its claim,
-- release the claim with the answer), then finish.lua's (the envelope and state, unless an
-- ok envelope is there or the run lost its task lease). The billed call is counted even
-- when the envelope is not stored: the gateway billed it either way.
--
-- KEYS[1] envelopes: hash node id -> envelope JSON
-- KEYS[2] states: hash node id -> state
-- KEYS[3] fence: the run's task lease key
-- KEYS[4] billed: set of call ids
-- KEYS[5] ledger: hash "<model>|<field>" -> int
-- KEYS[6] budget: hash
-- KEYS[7] answers: hash idempotency key -> answer JSON
-- KEYS[8] claim: the call's claim key
-- ARGV[1] node_id
-- ARGV[2] envelope: JSON
-- ARGV[3] state: "<state>|<model>"
-- ARGV[4] ttl_s
-- ARGV[5] fence_token: the run's task lease token ('' = the run holds no lease)
-- ARGV[6] call_id
-- ARGV[7] model
-- ARGV[8] prompt_tokens
-- ARGV[9] completion_tokens
-- ARGV[10] cached_tokens
-- ARGV[11] cost_nusd
-- ARGV[12] answer_key
-- ARGV[13] answer: JSON
-- ARGV[14] claim_token: the call's claim token
-- ARGV[15] reasoning_tokens
-- Returns 1 when the envelope was stored, 0 when an ok envelope was already there, -1 when
-- fenced.
if redis.call('SADD', KEYS[4], ARGV[6]) == 1 then
  local model = ARGV[7]
  redis.call('HINCRBY', KEYS[5], model .. '|calls', 1)
  redis.call('HINCRBY', KEYS[5], model .. '|prompt_tokens', ARGV[8])
  redis.call('HINCRBY', KEYS[5], model .. '|completion_tokens', ARGV[9])
  redis.call('HINCRBY', KEYS[5], model .. '|cached_tokens', ARGV[10])
  redis.call('HINCRBY', KEYS[5], model .. '|reasoning_tokens', ARGV[15])
  redis.call('HINCRBY', KEYS[6], 'spent_nusd', ARGV[11])
end
if redis.call('GET', KEYS[8]) == ARGV[14] then
  redis.call('HSETNX', KEYS[7], ARGV[12], ARGV[13])
  redis.call('DEL', KEYS[8])
end
for i = 4, 7 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('EXPIRE', KEYS[i], ARGV[4])
  end
end
if ARGV[5] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[5] then
  return -1
end
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing and cjson.decode(existing)['status'] == 'ok' then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
