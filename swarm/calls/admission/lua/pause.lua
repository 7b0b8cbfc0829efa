-- Milliseconds left of the model's 429 pause (0 when not paused). Clock = Redis TIME (ms).
-- A call that booked a rate slot asks this once before it is sent: a 429 that came in
-- while it waited for its slot pauses it too.
-- KEYS[1] state: hash
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local until_ms = tonumber(redis.call('HGET', KEYS[1], 'pause_until') or '0')
return string.format('%.3f', math.max(0, until_ms - now))
