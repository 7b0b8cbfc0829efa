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
-- ARGV[11] reasoning_tokens
-- ARGV[12] cost_nusd
-- ARGV[13] answer_key
-- ARGV[14] answer: JSON
-- ARGV[15] claim_token: the call's claim token
-- Returns 1 when the envelope was stored, 0 when an ok envelope was already there, -1 when
-- fenced.
count_call(KEYS[4], KEYS[5], KEYS[6], 6)
if redis.call('GET', KEYS[8]) == ARGV[15] then
  redis.call('HSETNX', KEYS[7], ARGV[13], ARGV[14])
  redis.call('DEL', KEYS[8])
end
expire_existing({KEYS[4], KEYS[5], KEYS[6], KEYS[7]}, ARGV[4])
return store_envelope(KEYS[1], KEYS[2], KEYS[3], 1)
