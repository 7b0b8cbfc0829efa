-- Take the lease on a task message and keep how to send the message again. The latest
-- delivery of a message wins: the broker delivers it again only when it believes the
-- earlier holder gone, and the earlier holder, fenced off, can no longer write.
--
-- KEYS[1] lease: string holding the fencing token
-- KEYS[2] resend: hash task id -> the message's signature JSON
-- ARGV[1] token: the new holder's fencing token
-- ARGV[2] ttl_ms: lease lifetime
-- ARGV[3] task_id
-- ARGV[4] signature: JSON
-- ARGV[5] ttl_s: the job's key lifetime
-- Returns 1.
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
