"""Records of some settings (the policies of admission, hedging and backend holds, an agent's
limits), built from Settings at the edge and passed inward: each field a setting gives names
that setting once, for its default and its value."""

from __future__ import annotations

import logging
from dataclasses import field, fields
from typing import Any, Self, cast

from swarm.settings import Settings

log = logging.getLogger(__name__)

SETTING = "setting"
"""The metadata key of a ``SettingsSlice`` field: the name of the setting that gives it."""


def default_of(name: str) -> Any:
    """The default of setting ``name`` (a default is written once, on the setting)."""
    return Settings.model_fields[name].default


def setting(name: str) -> Any:
    """A field of a ``SettingsSlice`` that setting ``name`` gives: the setting's default,
    and its value in ``from_settings``."""
    return field(default=default_of(name), metadata={SETTING: name})


class SettingsSlice:
    """A dataclass of some settings, built from Settings at the edge and passed inward
    (the policies of admission, hedging and backend holds, an agent's limits). Each field a
    setting gives names it with ``setting``: one place for the mapping and the default."""

    @classmethod
    def from_settings(cls, settings: Settings, **values: Any) -> Self:
        """The record ``settings`` gives; ``values`` set the fields no setting names."""
        named = {
            f.name: getattr(settings, f.metadata[SETTING])
            for f in fields(cast(Any, cls))
            if SETTING in f.metadata
        }
        log.debug("%s from settings: %s", cls.__name__, named)
        return cls(**named, **values)
