-- Count a job's node states on the server: how many nodes hold each state value, so a
-- progress read moves a few counts, not the whole hash (100,000 nodes: 100,000 fields).
--
-- KEYS[1] states: hash node id -> "<state>|<model>"
-- Returns a flat array: value, count, value, count, ...
local counts = {}
local values = redis.call('HVALS', KEYS[1])
for i = 1, #values do
  local value = values[i]
  counts[value] = (counts[value] or 0) + 1
end
local out = {}
for value, count in pairs(counts) do
  out[#out + 1] = value
  out[#out + 1] = count
end
return out
