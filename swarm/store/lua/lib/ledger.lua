-- Prelude (swarm.store.scripts): a billed call counted in the job's ledger exactly once, by
-- its call id, so a repeated write (a retry whose reply was lost) counts once.

-- count_call(billed, ledger, budget, at): the call whose values start at ARGV[at] (call_id,
-- model, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_nusd;
-- swarm.store.script_args.CallLine) added to the ledger hash ("<model>|<field>" -> int) and
-- the budget's spent_nusd unless the set billed has its id. 1 when counted now, else 0.
local function count_call(billed, ledger, budget, at)
  if redis.call('SADD', billed, ARGV[at]) == 0 then
    return 0
  end
  local model = ARGV[at + 1]
  redis.call('HINCRBY', ledger, model .. '|calls', 1)
  local fields = {'prompt_tokens', 'completion_tokens', 'cached_tokens', 'reasoning_tokens'}
  for i, field in ipairs(fields) do
    redis.call('HINCRBY', ledger, model .. '|' .. field, ARGV[at + 1 + i])
  end
  redis.call('HINCRBY', budget, 'spent_nusd', ARGV[at + 6])
  return 1
end

-- expire_existing(keys, ttl_s): the expiry of those of keys that exist (a key the script did
-- not create stays absent).
local function expire_existing(keys, ttl_s)
  for _, key in ipairs(keys) do
    if redis.call('EXISTS', key) == 1 then
      redis.call('EXPIRE', key, ttl_s)
    end
  end
end
