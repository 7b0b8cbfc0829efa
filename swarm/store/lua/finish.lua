-- Store a node's envelope and its state, unless the node already has an ok envelope (an
-- ok envelope is final; an error may be replaced by a later run), or the run lost its
-- lease (fenced: another run took the node over). One round trip, and the check and the
-- write cannot interleave with another run's.
--
-- KEYS[1] envelopes: hash node id -> envelope JSON
-- KEYS[2] states: hash node id -> state
-- KEYS[3] fence: the run's lease key
-- ARGV[1] node_id
-- ARGV[2] envelope: JSON
-- ARGV[3] state: "<state>|<model>"
-- ARGV[4] ttl_s
-- ARGV[5] fence_token: the run's fencing token ('' = the run holds no lease)
-- Returns 1 when stored, 0 when an ok envelope was already there, -1 when fenced.
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
