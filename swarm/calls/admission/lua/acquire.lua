-- Admit one gateway call, or say how long to wait. Atomic; clock = Redis TIME (ms).
-- Checks, all before any write: 429 pause, in-flight leases (expired ones purged first),
-- the job's fair share of max_inflight while other jobs of its tenant wait, the tenant's
-- share of the model's recent tokens while other tenants wait (swarm.calls.admission.shares),
-- then every GCRA rate limit. Jobs are kept under "<tenant>\t<job>" (their job key).
-- Commits (TATs, lease, per-job count, counters) only when everything passes, or when
-- only the rate limits refuse and their wait is at most the caller's reserve: then the
-- caller books its slot (TATs move on, the lease starts now) and waits for it, so waiters
-- are served in arrival order and do not all ask again when the next slot opens. A rate
-- wait past the reserve is refused with max(wait - reserve, reserve / 2).
-- A window limit (windowed 1: the gateway counts N per sliding or fixed window) is held
-- with a log of admission times instead of a bucket: N may pass at once, the next when
-- the oldest leaves the window (widened each side by the slack, at least 1% of the window;
-- not scaled by the rate factor: the count is what the gateway enforces).
--
-- KEYS[1] state: hash
-- KEYS[2] leases: zset lease -> expiry
-- KEYS[3] owners: hash lease -> job
-- KEYS[4] jobs: hash job key -> leases out
-- KEYS[5] waiters: zset caller -> expiry
-- KEYS[6] waiting_jobs: zset job key -> expiry
-- KEYS[7] log: zset lease -> admission time (window limits)
-- KEYS[8] tenants: hash tenant -> "<recent tokens> <at ms> <weight> <completion mean>"
-- KEYS[9] tenant_waiters: zset caller -> expiry, the callers of this tenant waiting
-- ARGV[1] lease_id
-- ARGV[2] job_id
-- ARGV[3] tokens
-- ARGV[4] lease_ms
-- ARGV[5] max_inflight
-- ARGV[6] slack_ms
-- ARGV[7] poll_ms
-- ARGV[8] increase: step of the rate factor
-- ARGV[9] quiet_ms
-- ARGV[10] reserve_ms: 0 = never book a slot
-- ARGV[11] max_poll_ms
-- ARGV[12] tenant
-- ARGV[13] weight: the tenant's
-- ARGV[14] charge: tokens charged to the tenant's recent use when admitted (the prompt's;
--          the tenant's mean completion is added)
-- ARGV[15] tenant_window_ms: time constant of the recent token use
-- ARGV[16..] limits: one group of 5 per rate limit: name, limit, window ms, burst,
--       windowed 0/1 (the limit named "tpm" costs tokens, others 1)
-- Returns {admitted 0/1, wait ms (string), reason, inflight, factor (string), completion
-- charged (the tenant's mean completion, added to the charge)}; admitted
-- with a wait > 0 (reason "reserved") means: call after that wait; admitted now with
-- reason "at_limit": the call filled a window limit (a booked call waited for a limit's
-- slot): a 429 on either is the tenant's limit. A tenant_share refusal waits at least the
-- time the lowest waiting tenant needs to catch up at the model's recent token rate (at
-- most window_ms).

local state, leases, owners, jobs, waiters, waiting_jobs, log, tenants =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local tenant_waiters = KEYS[9]
local tenant, weight, window_ms = ARGV[12], tonumber(ARGV[13]), tonumber(ARGV[15])
local lease_id, job, tokens = ARGV[1], tenant .. '\t' .. ARGV[2], tonumber(ARGV[3])
local lease_ms, max_inflight = tonumber(ARGV[4]), tonumber(ARGV[5])
local slack_ms, poll_ms = tonumber(ARGV[6]), tonumber(ARGV[7])
local step, quiet_ms = tonumber(ARGV[8]), tonumber(ARGV[9])
local reserve_ms, max_poll_ms = tonumber(ARGV[10]), tonumber(ARGV[11])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

-- Expired leases: their workers died mid-call. Give the permits back.
local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now)
for _, id in ipairs(expired) do
  local owner = redis.call('HGET', owners, id)
  if owner and redis.call('HINCRBY', jobs, owner, -1) <= 0 then
    redis.call('HDEL', jobs, owner)
  end
  redis.call('HDEL', owners, id)
end
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  redis.call('HINCRBY', state, 'expired', #expired)
end
redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now)
redis.call('ZREMRANGEBYSCORE', tenant_waiters, '-inf', now)
redis.call('ZREMRANGEBYSCORE', waiting_jobs, '-inf', now)

-- Additive increase of the rate factor after a quiet period.
local factor = tonumber(redis.call('HGET', state, 'factor') or '1')
if factor < 1 then
  local since = tonumber(redis.call('HGET', state, 'factor_at') or '0')
  if now - since >= quiet_ms then
    factor = math.min(1, factor + step)
    redis.call('HSET', state, 'factor', string.format('%.6f', factor),
      'factor_at', string.format('%.3f', now))
  end
end

-- In-flight and fair-share waits have no known end: the waiters that may take the permits
-- given back (for a tenant below every other waiting tenant's share, its own; else all of
-- them) together should ask about twice per lease released (finish.lua keeps the mean time
-- between releases), not every poll ms each; while no more wait than max_inflight, none
-- past the moment the oldest call out should end (its start plus the mean time calls hold
-- their lease, kept by finish.lua): a wave of calls frees its slots together, after a gap
-- the mean gap would sleep through.
local preferred = false
local function slot_poll()
  local dt = tonumber(redis.call('HGET', state, 'release_dt') or '0')
  local n = redis.call('ZCARD', preferred and tenant_waiters or waiters)
  local hint = math.min(max_poll_ms, n * dt / 2)
  local hold = tonumber(redis.call('HGET', state, 'hold_ms') or '-1')
  if hold >= 0 and n <= max_inflight then
    local oldest = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
    if oldest[2] then
      hint = math.min(hint, tonumber(oldest[2]) - lease_ms + hold - now)
    end
  end
  return math.max(poll_ms, hint)
end

local wait, reason, hard = 0, '', false
local function refuse(why, ms)
  if reason == '' or ms > wait then wait, reason = ms, why end
end

local function tenant_of(key)
  local name = string.match(key, '^([^\t]*)\t')
  return name or 'default'
end

-- The job keys waiting: other tenants' (tenant share), this tenant's other jobs (fair share).
local waiting = redis.call('ZRANGE', waiting_jobs, 0, -1)
local others_wait, other_tenants = false, {}
for _, other in ipairs(waiting) do
  local owner = tenant_of(other)
  if owner ~= tenant then other_tenants[owner] = true
  elseif other ~= job then others_wait = true end
end

local pause_until = tonumber(redis.call('HGET', state, 'pause_until') or '0')
if pause_until > now then refuse('paused', pause_until - now); hard = true end

-- Tenant share: a tenant's recent tokens decay with time constant window_ms; while another
-- tenant waits, one whose tokens / weight is above the lowest of the waiting ones' waits,
-- at least as long as that one needs to close the gap with all of the model's recent
-- token rate (every tenant's recent tokens / window_ms). Computed first, refused last,
-- and only while the model has a permit free (a full model's reason wins). A tenant below
-- every waiting one is preferred: the others are refused while it waits, so its hint
-- counts its own waiters.
local function parse_use(v)
  local u, at, w, c = string.match(v, '^(%S+) (%S+) (%S+) ?(%S*)$')
  local keep = math.exp(-math.max(now - tonumber(at), 0) / window_ms)
  return math.max(tonumber(u), 0) * keep, tonumber(w), tonumber(c) or 0
end
local function recent_use(name)
  local v = redis.call('HGET', tenants, name)
  if not v then return 0, 1, 0 end
  return parse_use(v)
end
-- Each tenant stands on the line at its normalized use plus half of its call (the charge
-- over its weight), or of its largest call refused lately (its hold, 'hold:<tenant>' in
-- the state hash: "<shift> <until ms>", HOLD_MS 3000 as shares.HOLD_MS): a large call goes
-- when its tenant is half its size below the line, not at the line, and its tenant's small
-- calls do not overtake it.
local function hold_of(name)
  local v = redis.call('HGET', state, 'hold:' .. name)
  if not v then return 0 end
  local h, till = string.match(v, '^(%S+) (%S+)$')
  if tonumber(till) <= now then return 0 end
  return tonumber(h)
end
local my_use, _w, my_completion = recent_use(tenant)
local expected = math.floor(math.max(my_completion, 0) + 0.5)
local shift = math.max(tonumber(ARGV[14]) + expected, 0) / (2 * weight)
local my_hold = hold_of(tenant)
local over_share, share_wait = false, 0
if next(other_tenants) ~= nil then
  local lowest, low_weight = math.huge, 1
  for name in pairs(other_tenants) do
    local u, w = recent_use(name)
    local place = u / w + hold_of(name)
    if place < lowest then lowest, low_weight = place, w end
  end
  local mine = my_use / weight + math.max(shift, my_hold)
  preferred = mine < lowest
  over_share = mine > lowest
  if over_share then
    local all, total = redis.call('HGETALL', tenants), 0
    for i = 2, #all, 2 do total = total + parse_use(all[i]) end
    share_wait = window_ms
    if total > 0 then
      share_wait = math.min((mine - lowest) * low_weight * window_ms / total, window_ms)
    end
  end
end

local inflight = redis.call('ZCARD', leases)
if inflight >= max_inflight then refuse('inflight', slot_poll()); hard = true end

-- Fair share: while other jobs of its tenant wait, a job may hold
-- ceil(max_inflight / the tenant's active jobs).
local mine = tonumber(redis.call('HGET', jobs, job) or '0')
if others_wait and mine > 0 then
  local active, n = {}, 0
  for _, names in ipairs({redis.call('HKEYS', jobs), waiting}) do
    for _, name in ipairs(names) do
      if tenant_of(name) == tenant then active[name] = true end
    end
  end
  active[job] = true
  for _ in pairs(active) do n = n + 1 end
  if mine >= math.ceil(max_inflight / n) then refuse('fair_share', slot_poll()); hard = true end
end

-- (on a full model the caller waits for a permit like any other: a task that gave its
-- thread back there would come back to the same full model)
if over_share and inflight < max_inflight then
  refuse('tenant_share', math.max(slot_poll(), share_wait)); hard = true
end

-- A window limit: N admissions in the (slack-widened) window, from the log (not scaled by
-- the factor: the count is what the gateway enforces).
local log_span = 0
local at_limit = false
local function window_limit(name, limit, window_ms)
  local span = window_ms + 2 * math.max(slack_ms, window_ms * 0.01)
  log_span = math.max(log_span, span)
  local from = '(' .. string.format('%.3f', now - span)
  local count = redis.call('ZCOUNT', log, from, '+inf')
  if count + 1 >= limit then at_limit = true end
  if count >= limit then
    local nth = redis.call('ZRANGEBYSCORE', log, from, '+inf', 'WITHSCORES', 'LIMIT',
      count - limit, 1)
    local w = tonumber(nth[2]) + span - now
    if w > 0 then refuse(name, w) end
  end
end

-- GCRA per rate limit, on the factor-scaled rate; window limits count the log.
local new_tats = {}
for i = 16, #ARGV, 5 do
  local name, limit = ARGV[i], tonumber(ARGV[i + 1])
  local window_ms, burst = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if ARGV[i + 4] == '1' then
    window_limit(name, limit, window_ms)
  else
    local cost = 1
    if name == 'tpm' then cost = tokens end
    local allowed = limit * factor
    local interval = (window_ms + 2 * slack_ms) / math.max(allowed - burst, allowed / 2)
    local tat = tonumber(redis.call('HGET', state, 'tat_' .. name) or '0')
    local base = math.max(tat, now)
    local new_tat = base + cost * interval
    local w = new_tat - burst * interval - now
    if cost > burst then w = base - now end
    if w > 0 then refuse(name, w) end
    new_tats[#new_tats + 1] = 'tat_' .. name
    new_tats[#new_tats + 1] = string.format('%.3f', new_tat)
  end
end

local factor_s = string.format('%.6f', factor)
local start_ms = 0
if reason ~= '' and not hard then
  if wait <= reserve_ms then
    start_ms, reason = wait, ''
  elseif reserve_ms > 0 then
    -- come back when the slot is within reach, but not before half the reserve has gone
    -- by (then about that many slots are free to book): no spinning behind the bookings
    wait = math.max(wait - reserve_ms, reserve_ms / 2)
  end
end
if reason ~= '' then
  local until_ms = now + wait + poll_ms * 4 + 1000
  redis.call('ZADD', waiters, until_ms, lease_id)
  redis.call('ZADD', tenant_waiters, until_ms, lease_id)
  redis.call('ZADD', waiting_jobs, 'GT', until_ms, job)
  -- the sets live as long as their latest entry (no waiter left behind keeps them forever)
  local keep_ms = math.ceil(until_ms - now)
  for _, key in ipairs({waiters, waiting_jobs, tenant_waiters}) do
    redis.call('PEXPIRE', key, keep_ms, 'NX')
    redis.call('PEXPIRE', key, keep_ms, 'GT')
  end
  redis.call('HINCRBY', state, 'refused', 1)
  if next(other_tenants) ~= nil and shift > 0 and shift >= my_hold then
    redis.call('HSET', state, 'hold:' .. tenant, string.format('%.3f %.3f', shift, now + 3000))
  end
  redis.call('HINCRBY', state, 'refused:' .. tenant .. ':' .. reason, 1)
  return {0, string.format('%.3f', wait), reason, inflight, factor_s, 0}
end

if #new_tats > 0 then redis.call('HSET', state, unpack(new_tats)) end
if log_span > 0 then
  redis.call('ZADD', log, string.format('%.3f', now + start_ms), lease_id)
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%.3f', now - log_span))
end
redis.call('ZADD', leases, now + start_ms + lease_ms, lease_id)
redis.call('HSET', owners, lease_id, job)
redis.call('HINCRBY', jobs, job, 1)
if my_hold > 0 and shift >= my_hold then redis.call('HDEL', state, 'hold:' .. tenant) end
redis.call('HSET', tenants, tenant, string.format('%.3f %.3f %s %.3f',
  my_use + tonumber(ARGV[14]) + expected, now, ARGV[13], my_completion))
-- idle tenants' use decays to nothing: the hash goes with them (10 time constants past the
-- longest lease, when e^-10 of any use is left)
redis.call('PEXPIRE', tenants, math.ceil(lease_ms + 10 * window_ms))
redis.call('ZREM', waiters, lease_id)
redis.call('ZREM', tenant_waiters, lease_id)
redis.call('HINCRBY', state, 'admitted', 1)
local admitted = 'ok'
if start_ms > 0 then admitted = 'reserved' elseif at_limit then admitted = 'at_limit' end
return {1, string.format('%.3f', start_ms), admitted, inflight + 1, factor_s, expected}
