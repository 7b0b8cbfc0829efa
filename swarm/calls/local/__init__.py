"""What a local backend's calls add to the path (``[backends.NAME] kind = "local"``).

A local server (llama.cpp, vLLM on one machine) computes a few requests at a time, generates
tens of tokens a second on a CPU and finishes a request after its client stopped waiting:

- ``pacing``: completion budgets fitted to the node timeout from the model's measured speed;
- ``overtime``: requests read past their node's deadline, so a late answer is billed;
- ``late``: a late answer kept for the call's next attempt;
- ``abandoned``: the admission permits such requests hold, and when they go back early;
- ``gate``: the local backend's admission gate (held permits, late answers);
- ``adaptive``: the backend's in-flight limit found from latency;
- ``steps``: the pace step and the overtime transport of the local path
  (swarm.calls.pipeline ``PATHS["local"]``).
"""
