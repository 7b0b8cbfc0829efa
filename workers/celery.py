"""Entry point of ``celery -A workers worker``: the app, built from the environment."""

from __future__ import annotations

import os
import sys

from swarm.catalog import load_catalog
from swarm.errors import SwarmError
from swarm.settings import load_settings
from workers.allocator import limit_arenas
from workers.factory import create_app

try:
    _settings = load_settings()
    limit_arenas(_settings.malloc_arenas, os.environ)  # before any thread starts
    app = create_app(_settings, load_catalog(_settings.config))
except SwarmError as exc:
    sys.exit(f"swarm worker: {exc}")

__all__ = ["app"]
