"""The ``docs`` toolset: search the job's documents and read a range of one.

The documents are the job's inputs, named by their references (the paths given to
`swarm analyze`), read from the job store.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from swarm.records import JobSpec
from swarm.store.base import JobStore
from swarm.tools.registry import Tool, line_range, make_tool

MAX_HITS = 50


class Documents:
    """The job's documents, loaded on first use."""

    def __init__(self, spec: JobSpec, store: JobStore) -> None:
        self.spec = spec
        self.store = store

    @cached_property
    def texts(self) -> dict[str, list[str]]:
        pairs = zip(self.spec.input_refs, self.spec.node_ids, strict=True)
        return {
            ref: self.store.input_text(self.spec.job_id, node).splitlines() for ref, node in pairs
        }

    def search(self, query: str, max_results: int = 20) -> str:
        words = [w for w in query.lower().split() if w]
        if not words:
            return "error: empty query"
        hits: list[tuple[int, str]] = []
        for ref, lines in self.texts.items():
            for number, line in enumerate(lines, 1):
                lowered = line.lower()
                score = sum(word in lowered for word in words)
                if score:
                    hits.append((-score, f"{ref}:{number}: {line.strip()[:200]}"))
        hits.sort(key=lambda hit: hit[0])
        shown = [text for _, text in hits[: min(max_results, MAX_HITS)]]
        return "\n".join(shown) or "no matches"

    def read(self, ref: str, start_line: int = 1, end_line: int = 100) -> str:
        lines = self.texts.get(ref)
        if lines is None:
            raise KeyError(f"no document {ref!r}; documents: {', '.join(self.texts)}")
        return line_range(ref, lines, start_line, end_line)


def toolset(spec: JobSpec, store: JobStore) -> Sequence[Tool]:
    """search_documents and read_document over the job's documents."""
    docs = Documents(spec, store)

    def search_documents(query: str, max_results: int = 20) -> str:
        """Search every document of this job for lines with the query's words; returns
        document:line: text, best matches first."""
        return docs.search(query, max_results)

    def read_document(document: str, start_line: int = 1, end_line: int = 100) -> str:
        """Read lines start_line..end_line (1-based, inclusive) of one document of this job,
        named as search_documents shows it."""
        return docs.read(document, start_line, end_line)

    return [make_tool(search_documents), make_tool(read_document)]
