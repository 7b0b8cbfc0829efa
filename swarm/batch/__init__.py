"""Jobs with a deadline through the gateway's Batch API: half price for work that can wait.

A job submitted with a deadline (``SwarmClient.submit(..., deadline_s=...)``, ``swarm run
--deadline 24h``) sends its eligible nodes (no tools, a model whose catalog entry says
``batch = true``, an input that fits the model's window) as batch files instead of live
calls; every other node runs live as before, and without a deadline nothing changes.

    producer   plan     the files: one model per file, split by the model's line and byte
                        limits (swarm.batch.plan); their states stored (swarm.store.batches)
               chord    the live nodes' tasks + one poll task per file (``swarm.batch.poll``,
                        id ``<job>-batch<i>``, args ``(job, [nodes], i)``), then the
                        aggregation, as for any job: it runs once, after every member ended
    worker     poll     one short step per run, re-sent with a countdown (swarm.batch.poll):
                        find the file's batch by its metadata or create it, store its id,
                        read its status; at its end, record each output line as the node's
                        billed call and stored answer (swarm.batch.ingest) and end the nodes
                        through the sub-agent code (which reuses those answers: ``via``
                        batch); failed, expired or missing lines, and every pending line
                        once the deadline nears (the batch cancelled), run live

No thread waits on a batch: between two polls the task is a countdown message. The batch id
is stored before the poll's message is acknowledged, and a run that died between creating
the batch and storing its id is repaired by the next run, which finds the batch by its
metadata (``swarm_job``, ``swarm_file``) before creating one. A batch line and a live call
of the same node share the node's idempotency key (the line's ``custom_id``): the first
answer stored is the node's, each billed response is counted once in the ledger, at the
batch price for batch lines (ledger model ``<name>|batch``, swarm.cost.batch).

Agent nodes (with tools) run live: each of their steps depends on the tool results of the
one before, so a batch per step would make a node wait a batch turnaround per step.
"""
