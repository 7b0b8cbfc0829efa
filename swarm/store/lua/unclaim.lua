-- Delete a claim only if it is still ours (another run may have taken it over after ours
-- expired).
--
-- KEYS[1] claim
-- ARGV[1] owner
-- Returns 1 when deleted, 0 when the claim was not ours (or gone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
