-- Prelude (swarm.store.scripts): a node's envelope written unless the node already has an
-- ok envelope (an ok envelope is final; an error may be replaced by a later run) or the run
-- lost its lease (fenced: another run took the node over).

-- store_envelope(envelopes, states, fence, at): the envelope whose values start at ARGV[at]
-- (node_id, envelope JSON, state "<state>|<model>", ttl_s, fence_token: the run's token, ''
-- when it holds no lease; swarm.store.script_args.NodeWrite) into the hashes envelopes and
-- states, checked against the lease key fence. 1 when stored, 0 when an ok envelope was
-- already there, -1 when fenced.
local function store_envelope(envelopes, states, fence, at)
  local node_id, ttl_s, token = ARGV[at], ARGV[at + 3], ARGV[at + 4]
  if token ~= '' and redis.call('GET', fence) ~= token then
    return -1
  end
  local existing = redis.call('HGET', envelopes, node_id)
  if existing and cjson.decode(existing)['status'] == 'ok' then
    return 0
  end
  redis.call('HSET', envelopes, node_id, ARGV[at + 1])
  redis.call('HSET', states, node_id, ARGV[at + 2])
  redis.call('EXPIRE', envelopes, ttl_s)
  redis.call('EXPIRE', states, ttl_s)
  return 1
end
