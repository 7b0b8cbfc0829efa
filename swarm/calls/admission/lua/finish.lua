-- An admitted call ended: release its lease, reconcile its tokens, apply 429 feedback.
-- Idempotent for the lease and the tokens (applied only when the lease was still out);
-- the 429 feedback always applies. Clock = Redis TIME (ms).
--
-- KEYS[1] state: hash
-- KEYS[2] leases: zset
-- KEYS[3] owners: hash
-- KEYS[4] jobs: hash
-- KEYS[5] job_429: hash job -> 429s
-- ARGV[1] lease_id
-- ARGV[2] job_id
-- ARGV[3] token_delta: reported - reserved; -reserved refunds
-- ARGV[4] tpm
-- ARGV[5] tpm_burst
-- ARGV[6] slack_ms
-- ARGV[7] rate_limited: 0/1
-- ARGV[8] pause_ms
-- ARGV[9] decrease
-- ARGV[10] min_factor
-- ARGV[11] cooldown_ms: between two decreases
-- ARGV[12] counts_ttl_s: of the per-job counts
-- Returns 1 when the lease was released here, 0 when it was already gone.

local state, leases, owners, jobs, job_429 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local lease_id, job, delta = ARGV[1], ARGV[2], tonumber(ARGV[3])
local tpm, burst, slack_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rate_limited, pause_ms = ARGV[7] == '1', tonumber(ARGV[8])
local decrease, min_factor = tonumber(ARGV[9]), tonumber(ARGV[10])
local cooldown_ms, counts_ttl = tonumber(ARGV[11]), tonumber(ARGV[12])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local factor = tonumber(redis.call('HGET', state, 'factor') or '1')

local released = redis.call('ZREM', leases, lease_id)
if released == 1 then
  local owner = redis.call('HGET', owners, lease_id)
  if owner and redis.call('HINCRBY', jobs, owner, -1) <= 0 then
    redis.call('HDEL', jobs, owner)
  end
  redis.call('HDEL', owners, lease_id)
  -- Mean time between releases (EWMA, gaps capped at 1 s): spaces in-flight waiters' polls.
  local last = tonumber(redis.call('HGET', state, 'released_at') or '0')
  if last > 0 then
    local dt = math.min(math.max(now - last, 0), 1000)
    local mean = tonumber(redis.call('HGET', state, 'release_dt') or tostring(dt))
    redis.call('HSET', state, 'release_dt', string.format('%.3f', mean * 0.9 + dt * 0.1))
  end
  redis.call('HSET', state, 'released_at', string.format('%.3f', now))
  if delta ~= 0 and tpm > 0 then
    local allowed = tpm * factor
    local interval = (60000 + 2 * slack_ms) / math.max(allowed - burst, allowed / 2)
    local tat = tonumber(redis.call('HGET', state, 'tat_tpm') or '0')
    if delta > 0 then
      tat = math.max(tat, now) + delta * interval
    else
      tat = math.max(tat + delta * interval, now)
    end
    redis.call('HSET', state, 'tat_tpm', string.format('%.3f', tat))
  end
end

if rate_limited then
  redis.call('HINCRBY', state, 'rate_limited', 1)
  redis.call('HINCRBY', job_429, job, 1)
  redis.call('EXPIRE', job_429, counts_ttl)
  local pause_until = tonumber(redis.call('HGET', state, 'pause_until') or '0')
  if now + pause_ms > pause_until then
    redis.call('HSET', state, 'pause_until', string.format('%.3f', now + pause_ms))
  end
  local last = tonumber(redis.call('HGET', state, 'decreased_at') or '0')
  if now - last >= cooldown_ms then
    factor = math.max(min_factor, factor * decrease)
    redis.call('HSET', state, 'factor', string.format('%.6f', factor),
      'factor_at', string.format('%.3f', now), 'decreased_at', string.format('%.3f', now))
  end
end
return released
