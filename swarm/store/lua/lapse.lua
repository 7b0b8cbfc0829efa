-- Take a lapsed task lease for a sweeper, or settle it once its message is sent.
--
-- 'take': when no lease is set and the member is due on this server's clock, hold it for
-- the sweeper (its lease set to 'hold:' .. ARGV[3] for ARGV[4] ms, the member due again
-- then; a delivery of the message takes a hold over, receive.lua) and
-- return the signature that sends the message: a sweeper killed before it sent the message
-- leaves a lapse that falls due again, not a member gone from the index. One winner: the
-- hold is the lease a second sweeper finds set.
-- 'settle': the message was sent; drop the hold and the member, only while the hold is the
-- sweeper's (a run that received the message meanwhile holds its own lease and member).
--
-- KEYS[1] index: sorted set "<job id>|task:<task id>" -> expiry in ms
-- KEYS[2] lease: the task's lease key
-- KEYS[3] resend: hash task id -> signature
-- ARGV[1] mode: 'take' or 'settle'
-- ARGV[2] member
-- ARGV[3] token: the sweeper's hold
-- ARGV[4] hold_ms
-- ARGV[5] task_id
-- Returns the signature ('take' won) or false; 1 or 0 ('settle').
local hold = 'hold:' .. ARGV[3]
if ARGV[1] == 'settle' then
  if redis.call('GET', KEYS[2]) ~= hold then
    return 0
  end
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return false
end
local due = redis.call('ZSCORE', KEYS[1], ARGV[2])
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if not due or tonumber(due) > ms then
  return false
end
local signature = redis.call('HGET', KEYS[3], ARGV[5])
if not signature then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return false
end
local hold_ms = tonumber(ARGV[4])
redis.call('SET', KEYS[2], hold, 'PX', hold_ms)
redis.call('ZADD', KEYS[1], ms + hold_ms, ARGV[2])
return signature
