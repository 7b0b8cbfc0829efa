"""What a local backend's calls keep (``kind = "local"``: a server with a few slots, such
as llama.cpp), built on admission (swarm.calls.admission), never the reverse; the steps
that use it in the call path are swarm.calls.local_steps.

    kit        the process's local state, built only when the catalog has a local backend
    pacing     completion budgets that fit the node timeout, from the measured speed
    overtime   requests read past their node's deadline, so a late answer is billed
    abandoned  the permits of those requests: held until they end or show they hang
    late       a call's late answer, kept for its next attempt
    gate       the admission gate that holds those permits and takes late answers
    adaptive   a backend's in-flight limit found from latency
"""
