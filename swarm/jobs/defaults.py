"""What a job's instructions are when the producer gives none (plain strings: the CLI's option
defaults read them without importing the producer API)."""

from __future__ import annotations

DEFAULT_INSTRUCTION = "Review this input. List concrete problems and risks, most severe first."
DEFAULT_AGGREGATE = (
    "Merge the sub-agents' results into one report: the most important findings first, "
    "each with the inputs it concerns; note disagreements."
)
DEFAULT_PLANNED_AGGREGATE = (
    "Answer the question from the sub-agents' results: a structured survey in Markdown, "
    "each claim followed by the documents it comes from in brackets."
)
