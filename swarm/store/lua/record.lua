-- Record one billed gateway response, exactly once, and store its answer (first one wins).
-- Counting and storing happen in one script, so the ledger, the spent budget and the
-- stored answer never disagree, and a repeated call id (a retried write) counts once. A
-- run that lost its claim (fenced: another run took the call over) still counts what the
-- gateway billed it, but does not store its answer. A run that stores its answer under its
-- claim (fence) is done with the slot: the claim is released here, in the same round trip
-- (a later run finds the answer).
--
-- KEYS[1] billed: set of call ids
-- KEYS[2] ledger: hash "<model>|<field>" -> int
-- KEYS[3] budget: hash
-- KEYS[4] answers: hash idempotency key -> answer JSON
-- KEYS[5] fence: the run's claim key
-- ARGV[1] call_id
-- ARGV[2] model
-- ARGV[3] prompt_tokens
-- ARGV[4] completion_tokens
-- ARGV[5] cached_tokens
-- ARGV[6] cost_nusd
-- ARGV[7] answer_key: '' for none
-- ARGV[8] answer: JSON
-- ARGV[9] ttl_s
-- ARGV[10] fence_token: the run's fencing token ('' = no claim to check)
-- ARGV[11] reasoning_tokens
-- Returns 1 when the call was counted now, 0 when it had been counted before.
local new = redis.call('SADD', KEYS[1], ARGV[1])
if new == 1 then
  local model = ARGV[2]
  redis.call('HINCRBY', KEYS[2], model .. '|calls', 1)
  redis.call('HINCRBY', KEYS[2], model .. '|prompt_tokens', ARGV[3])
  redis.call('HINCRBY', KEYS[2], model .. '|completion_tokens', ARGV[4])
  redis.call('HINCRBY', KEYS[2], model .. '|cached_tokens', ARGV[5])
  redis.call('HINCRBY', KEYS[2], model .. '|reasoning_tokens', ARGV[11])
  redis.call('HINCRBY', KEYS[3], 'spent_nusd', ARGV[6])
end
local fenced = ARGV[10] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[10]
if ARGV[7] ~= '' and not fenced then
  redis.call('HSETNX', KEYS[4], ARGV[7], ARGV[8])
  if ARGV[10] ~= '' then
    redis.call('DEL', KEYS[5])
  end
end
for i = 1, 4 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('EXPIRE', KEYS[i], ARGV[9])
  end
end
return new
