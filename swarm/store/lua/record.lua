-- Record one billed gateway response, exactly once (lib/ledger.lua), and store its answer
-- (first one wins). Counting and storing happen in one script, so the ledger, the spent
-- budget and the stored answer never disagree. A run that lost its claim (fenced: another
-- run took the call over) still counts what the gateway billed it, but does not store its
-- answer. A run that stores its answer under its claim (fence) is done with the slot: the
-- claim is released here, in the same round trip (a later run finds the answer).
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
-- ARGV[6] reasoning_tokens
-- ARGV[7] cost_nusd
-- ARGV[8] answer_key: '' for none
-- ARGV[9] answer: JSON
-- ARGV[10] ttl_s
-- ARGV[11] fence_token: the run's fencing token ('' = no claim to check)
-- Returns 1 when the call was counted now, 0 when it had been counted before.
local new = count_call(KEYS[1], KEYS[2], KEYS[3], 1)
local fenced = ARGV[11] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[11]
if ARGV[8] ~= '' and not fenced then
  redis.call('HSETNX', KEYS[4], ARGV[8], ARGV[9])
  if ARGV[11] ~= '' then
    redis.call('DEL', KEYS[5])
  end
end
expire_existing({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, ARGV[10])
return new
