"""Parsed job specs kept per process, checked against a small revision key on every read.

A spec holds every node's id and input reference, so it grows with the job, and every
task message reads it. Reading and parsing it whole per task made a job's cost per node
grow with its size; with this cache a
task reads the revision (a 16-character digest of the spec JSON, written with it) and
parses the spec only when that revision is new to the process.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from swarm.records import JobSpec

MAX_SPECS = 8
"""Specs kept per process (the least recently read goes first)."""


def spec_revision(spec_json: str) -> str:
    """The revision stored beside a spec: a digest of its JSON."""
    return hashlib.blake2b(spec_json.encode(), digest_size=8).hexdigest()


class SpecCache:
    """Job id -> (revision, spec), for at most ``size`` jobs; thread-safe."""

    def __init__(self, size: int = MAX_SPECS) -> None:
        self._size = size
        self._specs: OrderedDict[str, tuple[str, JobSpec]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, job_id: str, revision: str | None) -> JobSpec | None:
        """The cached spec of ``job_id`` when it has ``revision``, else None."""
        if revision is None:
            return None
        with self._lock:
            found = self._specs.get(job_id)
            if found is None or found[0] != revision:
                return None
            self._specs.move_to_end(job_id)
            return found[1]

    def put(self, job_id: str, raw: str, revision: str | None) -> JobSpec:
        """Parse ``raw``; keep it when it is the JSON ``revision`` names (a spec written
        between reading the revision and the spec is parsed but not kept)."""
        spec = JobSpec.model_validate_json(raw)
        if revision is not None and spec_revision(raw) == revision:
            with self._lock:
                self._specs[job_id] = (revision, spec)
                self._specs.move_to_end(job_id)
                while len(self._specs) > self._size:
                    self._specs.popitem(last=False)
        return spec
