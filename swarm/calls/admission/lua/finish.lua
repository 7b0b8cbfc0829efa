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
--
-- KEYS[1] state: hash
-- KEYS[2] leases: zset
-- KEYS[3] owners: hash
-- KEYS[4] jobs: hash
-- KEYS[5] job_429: hash job -> 429s
-- KEYS[6] log: zset lease -> admission time (window limits)
-- KEYS[7] tenants: hash tenant -> "<recent tokens> <at ms> <weight> <completion mean>" (the
--         lease's tenant's recent use is corrected by the token delta, decayed since its
--         admission; the reported completion goes into its running mean)
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
-- ARGV[18] lease_ms: lifetime a lease was given at acquire (its start = expiry - lease_ms)
-- ARGV[19] tenant_delta: reported - charged to the tenant at acquire; -charged refunds
-- ARGV[20] tenant_window_ms: time constant of the tenants' recent token use
-- ARGV[21] completion: completion tokens reported (-1: none reported)
-- ARGV[22..] request_limits: the limits a call costs 1 of (not tpm), as acquire.lua reads
--       them, one group of 5 each:
--       name, limit, window ms, burst, windowed 0/1. A permit given back unused (sent 0)
--       gives their slots back: its bucket TATs move back one interval (never below now),
--       its window-log entry goes.
-- Returns {1 when the lease was released here (else 0), 1 when every caller paused}.

local state, leases, owners, jobs, job_429 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local log, tenants = KEYS[6], KEYS[7]
local lease_id, job, delta = ARGV[1], ARGV[2], tonumber(ARGV[3])
local tpm, burst, slack_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local rate_limited, pause_ms = ARGV[7] == '1', tonumber(ARGV[8])
local decrease, min_factor = tonumber(ARGV[9]), tonumber(ARGV[10])
local cooldown_ms, counts_ttl = tonumber(ARGV[11]), tonumber(ARGV[12])
local sent, exhausted = ARGV[13] == '1', ARGV[14] == '1'
local dense_ms, dense_min, dense_share = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local lease_ms, tenant_delta = tonumber(ARGV[18]), tonumber(ARGV[19])
local window_ms = tonumber(ARGV[20])
local completion = tonumber(ARGV[21])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local factor = tonumber(redis.call('HGET', state, 'factor') or '1')

local expiry = redis.call('ZSCORE', leases, lease_id)
local released = redis.call('ZREM', leases, lease_id)
if released == 1 then
  local held = math.max(now - (tonumber(expiry) - lease_ms), 0)
  if sent then
    -- Mean time calls hold their lease (EWMA): when the oldest call out should end.
    local hold = tonumber(redis.call('HGET', state, 'hold_ms') or tostring(held))
    redis.call('HSET', state, 'hold_ms', string.format('%.3f', hold * 0.8 + held * 0.2))
  end
  local owner = redis.call('HGET', owners, lease_id)
  if owner and (tenant_delta ~= 0 or completion >= 0) then
    -- the tenant's recent use: the delta as decayed as the charge it corrects; its mean
    -- completion: the reported one weighs 0.2 (shares.COMPLETION_MEAN_WEIGHT)
    local name = string.match(owner, '^([^\t]*)\t') or 'default'
    local v = redis.call('HGET', tenants, name)
    if v then
      local u, at, w, c = string.match(v, '^(%S+) (%S+) (%S+) ?(%S*)$')
      local use = tonumber(u) * math.exp(-math.max(now - tonumber(at), 0) / window_ms)
      use = math.max(use + tenant_delta * math.exp(-held / window_ms), 0)
      local mean = tonumber(c) or 0
      if completion >= 0 then
        if mean <= 0 then mean = completion else mean = mean + 0.2 * (completion - mean) end
      end
      redis.call('HSET', tenants, name, string.format('%.3f %.3f %s %.3f', use, now, w, mean))
      redis.call('PEXPIRE', tenants, math.ceil(lease_ms + 10 * window_ms))
    end
  end
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
  if not sent then
    for i = 22, #ARGV, 5 do
      local name, limit = ARGV[i], tonumber(ARGV[i + 1])
      local window_ms, rburst = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
      if ARGV[i + 4] == '1' then
        redis.call('ZREM', log, lease_id)
      else
        local allowed = limit * factor
        local interval = (window_ms + 2 * slack_ms) / math.max(allowed - rburst, allowed / 2)
        local tat = redis.call('HGET', state, 'tat_' .. name)
        if tat then
          tat = math.max(tonumber(tat) - interval, now)
          redis.call('HSET', state, 'tat_' .. name, string.format('%.3f', tat))
        end
      end
    end
  end
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

-- The model's recent requests and 429s, decaying with time constant dense_ms since
-- 'recent_at': read as they are, or (a request was sent) decayed to now, this one counted,
-- and written back.
local counts = redis.call('HMGET', state, 'recent_req', 'recent_429', 'recent_at')
local recent_req, recent_429 = tonumber(counts[1] or '0'), tonumber(counts[2] or '0')
if sent then
  local keep = math.exp(-math.max(now - tonumber(counts[3] or '0'), 0) / dense_ms)
  recent_req = recent_req * keep + 1
  recent_429 = recent_429 * keep + (rate_limited and 1 or 0)
  redis.call('HSET', state, 'recent_at', string.format('%.3f', now), 'recent_req',
    string.format('%.4f', recent_req), 'recent_429', string.format('%.4f', recent_429))
end

-- Every caller of the model waits pause_ms from now (a pause that ends later stays).
local function pause_all()
  redis.call('HINCRBY', state, 'pauses', 1)
  local pause_until = tonumber(redis.call('HGET', state, 'pause_until') or '0')
  if now + pause_ms > pause_until then
    redis.call('HSET', state, 'pause_until', string.format('%.3f', now + pause_ms))
  end
  return 1
end

local paused = 0
if rate_limited then
  redis.call('HINCRBY', state, 'rate_limited', 1)
  redis.call('HINCRBY', job_429, job, 1)
  redis.call('EXPIRE', job_429, counts_ttl)
  local dense = recent_429 >= dense_min and recent_429 >= dense_share * recent_req
  if exhausted or dense then
    paused = pause_all()
    local last = tonumber(redis.call('HGET', state, 'decreased_at') or '0')
    if dense and now - last >= cooldown_ms then
      factor = math.max(min_factor, factor * decrease)
      redis.call('HSET', state, 'factor', string.format('%.6f', factor),
        'factor_at', string.format('%.3f', now), 'decreased_at', string.format('%.3f', now))
    end
  end
elseif exhausted and sent then
  paused = pause_all()
end
return {released, paused}
