"""`swarm bench`: the seeds' concurrency table and a goodput run, against `swarm sim`.

    procs     local processes: redis-server, the simulator, `celery -A workers worker`
    baseline  the seed 000 client: aiohttp + asyncio.Semaphore, retries on 429, no limiter
    swarm     the same load through swarm (Redis broker, worker processes, admission)
    sweep     concurrency sweep of both clients, side by side
    goodput   a long load against an RPM-capped gateway: successful calls per minute
    output    markdown tables and the PNG plot
    overhead  a plain Celery chord (plain_chord) vs swarm, scenarios in overhead_runs

Everything runs on 127.0.0.1 and stops by itself.

This package is the benchmark support that ships with swarm (the `swarm bench` command and
what ops/bench's scripts import); ops/bench/ holds the maintained benchmark scripts of the
repository and ops/bench/results/ their current tables (docs/benchmarks.md lists both).
"""
