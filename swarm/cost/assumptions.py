"""What the cost projections assume unless told otherwise (plain numbers: `swarm cost`'s
option defaults read them without importing the catalog)."""

from __future__ import annotations

DAYS_PER_MONTH = 30
"""A month in the projections (100 swarms a day: 3,000 a month)."""
DEFAULT_SWARMS_PER_DAY = 100
