-- An admitted call ended: release its lease, reconcile its tokens, apply 429 feedback.
-- Idempotent for the lease and the tokens (applied only when the lease was still out);
-- the 429 feedback always applies. Clock = Redis TIME (ms).
-- A 429 pauses every caller and cuts the rate factor only on evidence that the tenant is
-- at its limit: the gateway said a limit is used up (exhausted), or 429s are dense among
-- the model's recent requests (counts decaying with time constant dense_ms; at least
-- dense_min 429s and at least dense_share of the requests). Otherwise only its own call
-- backs off (the caller's retry honours its Retry-After). Only dense 429s cut the rate
-- factor: an exhausted limit alone pauses until the gateway's reset and no more. An
-- answer (not a 429) whose headers say a limit is used up (exhausted) pauses every caller
-- until the reset as well; it is no 429.
-- The retry budget is per job and model: decaying counts of the job's requests and failed
-- ones on this model (KEYS[6], expiring once the counts have decayed away).
--
-- KEYS[1] state: hash
-- KEYS[2] leases: zset
-- KEYS[3] owners: hash
-- KEYS[4] jobs: hash
-- KEYS[5] job_429: hash job -> 429s
-- KEYS[6] job_budget: hash of the job's recent requests and failures on the model
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
-- ARGV[13] sent: 0/1 (0: a permit given back unused, not a request)
-- ARGV[14] exhausted: 0/1 (a limit used up: an x-ratelimit-remaining-* header at 0, or a 429
--           on a call admitted at the configured limit)
-- ARGV[15] dense_ms: time constant of the recent counts
-- ARGV[16] dense_min: fewest recent 429s that are dense
-- ARGV[17] dense_share: share of recent requests answered 429 that is dense
-- ARGV[18] failed: 0/1 (no usable answer: counts against the retry budget)
-- ARGV[19] budget_min: recent requests before the retry budget can be spent
-- ARGV[20] budget_share: below this share of recent requests answered, retries stop
-- ARGV[21] lease_ms: lifetime a lease was given at acquire (its start = expiry - lease_ms)
-- Returns {1 when the lease was released here (else 0), 1 when every caller paused,
-- 1 when the job's retry budget on the model is spent}.

local state, leases, owners, jobs, job_429 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local job_budget = KEYS[6]
local lease_id, job, delta = ARGV[1], ARGV[2], tonumber(ARGV[3])
local tpm, burst, slack_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rate_limited, pause_ms = ARGV[7] == '1', tonumber(ARGV[8])
local decrease, min_factor = tonumber(ARGV[9]), tonumber(ARGV[10])
local cooldown_ms, counts_ttl = tonumber(ARGV[11]), tonumber(ARGV[12])
local sent, exhausted = ARGV[13] == '1', ARGV[14] == '1'
local dense_ms, dense_min, dense_share = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local failed, budget_min, budget_share = ARGV[18] == '1', tonumber(ARGV[19]), tonumber(ARGV[20])
local lease_ms = tonumber(ARGV[21])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local factor = tonumber(redis.call('HGET', state, 'factor') or '1')

local expiry = redis.call('ZSCORE', leases, lease_id)
local released = redis.call('ZREM', leases, lease_id)
if released == 1 then
  if sent then
    -- Mean time calls hold their lease (EWMA): when the oldest call out should end.
    local held = math.max(now - (tonumber(expiry) - lease_ms), 0)
    local hold = tonumber(redis.call('HGET', state, 'hold_ms') or tostring(held))
    redis.call('HSET', state, 'hold_ms', string.format('%.3f', hold * 0.8 + held * 0.2))
  end
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

-- The model's recent requests and 429s, as counts decaying with time constant dense_ms.
local recent_req = tonumber(redis.call('HGET', state, 'recent_req') or '0')
local recent_429 = tonumber(redis.call('HGET', state, 'recent_429') or '0')
local recent_failed = tonumber(redis.call('HGET', state, 'recent_failed') or '0')
if sent then
  local since = tonumber(redis.call('HGET', state, 'recent_at') or '0')
  local keep = math.exp(-math.max(now - since, 0) / dense_ms)
  recent_req = recent_req * keep + 1
  recent_429 = recent_429 * keep
  recent_failed = recent_failed * keep
  if rate_limited then recent_429 = recent_429 + 1 end
  if failed then recent_failed = recent_failed + 1 end
  redis.call('HSET', state, 'recent_req', string.format('%.4f', recent_req),
    'recent_429', string.format('%.4f', recent_429),
    'recent_failed', string.format('%.4f', recent_failed), 'recent_at', string.format('%.3f', now))
end
-- The same counts for the job alone: its retry budget on this model.
local job_req = tonumber(redis.call('HGET', job_budget, 'req') or '0')
local job_failed = tonumber(redis.call('HGET', job_budget, 'failed') or '0')
if sent then
  local since = tonumber(redis.call('HGET', job_budget, 'at') or '0')
  local keep = math.exp(-math.max(now - since, 0) / dense_ms)
  job_req = job_req * keep + 1
  job_failed = job_failed * keep
  if failed then job_failed = job_failed + 1 end
  redis.call('HSET', job_budget, 'req', string.format('%.4f', job_req),
    'failed', string.format('%.4f', job_failed), 'at', string.format('%.3f', now))
  redis.call('PEXPIRE', job_budget, math.ceil(dense_ms * 20))
end
local spent = 0
if job_req >= budget_min and job_req - job_failed < budget_share * job_req then
  spent = 1
end

local paused = 0
if rate_limited then
  redis.call('HINCRBY', state, 'rate_limited', 1)
  redis.call('HINCRBY', job_429, job, 1)
  redis.call('EXPIRE', job_429, counts_ttl)
  local dense = recent_429 >= dense_min and recent_429 >= dense_share * recent_req
  if exhausted or dense then
    paused = 1
    redis.call('HINCRBY', state, 'pauses', 1)
    local pause_until = tonumber(redis.call('HGET', state, 'pause_until') or '0')
    if now + pause_ms > pause_until then
      redis.call('HSET', state, 'pause_until', string.format('%.3f', now + pause_ms))
    end
    local last = tonumber(redis.call('HGET', state, 'decreased_at') or '0')
    if dense and now - last >= cooldown_ms then
      factor = math.max(min_factor, factor * decrease)
      redis.call('HSET', state, 'factor', string.format('%.6f', factor),
        'factor_at', string.format('%.3f', now), 'decreased_at', string.format('%.3f', now))
    end
  end
elseif exhausted and sent then
  paused = 1
  redis.call('HINCRBY', state, 'pauses', 1)
  local pause_until = tonumber(redis.call('HGET', state, 'pause_until') or '0')
  if now + pause_ms > pause_until then
    redis.call('HSET', state, 'pause_until', string.format('%.3f', now + pause_ms))
  end
end
return {released, paused, spent}
