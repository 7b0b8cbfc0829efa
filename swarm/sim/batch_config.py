"""Configuration of the simulator's Batch API (``SimConfig.batch``): one frozen record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DAY_S = 24 * 3600.0


class BatchSimConfig(BaseModel):
    """How the simulated ``/v1/batches`` behaves; defaults: 2 s per batch, no failures."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    validating_s: float = Field(default=0.0, ge=0.0)
    """Time a new batch stays ``validating``."""
    processing_s: float = Field(default=2.0, ge=0.0)
    """Time a batch stays ``in_progress``; its lines end evenly spread over it."""
    finalizing_s: float = Field(default=0.0, ge=0.0)
    """Time a batch stays ``finalizing`` once its lines ended."""
    cancel_s: float = Field(default=0.0, ge=0.0)
    """Time a cancelled batch stays ``cancelling`` before it is ``cancelled``."""
    expire_s: float | None = Field(default=None, gt=0.0)
    """A batch not done this long after its creation ends ``expired`` (its lines done by
    then are billed, the others are in the error file as ``batch_expired``); None: the
    completion window (24 h)."""
    failed_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Share of lines answered 500 in the error file (chosen by a hash of the line's
    custom_id and the seed, so the same line fails the same way)."""
    discount: float = Field(default=0.5, gt=0.0, le=1.0)
    """Price of a batch line as a fraction of the live price (reported in /stats)."""
    max_lines: int = Field(default=50_000, ge=1)
    """Lines a batch file may hold; more fails the batch at validation."""
    max_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    """Bytes a batch file may hold; more is refused at upload (413)."""
    refused_fields: tuple[str, ...] = ()
    """Body fields a line may not carry (e.g. ``temperature``); such a line fails (400)."""
    one_model: bool = False
    """A file whose lines name more than one model fails at validation (Kimi's rule)."""
    enabled: bool = True
    """False: the Batch API routes answer 404 (a gateway without batch support)."""

    def window_s(self, completion_window: str) -> float:
        """Seconds until expiry of a batch created with ``completion_window``."""
        if self.expire_s is not None:
            return self.expire_s
        return DAY_S if completion_window == "24h" else parse_window_s(completion_window)


def parse_window_s(text: str) -> float:
    """``24h``, ``30m``, ``90s`` as seconds (24 h when not understood)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "d": DAY_S}
    try:
        return float(text[:-1]) * units[text[-1]]
    except (KeyError, ValueError, IndexError):
        return DAY_S
