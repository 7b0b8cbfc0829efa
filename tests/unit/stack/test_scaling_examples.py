"""The docs' scaling examples scale the workers a default `swarm run` uses: the first
service each `--replicas` / `--scale` names serves the queue the catalog routes the
default kind to (a newcomer who copies the example expects a default run to speed up)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swarm.catalog import DEFAULT_KIND, load_catalog
from swarm.stack.compose import load_compose

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = [ROOT / "docs" / "deployment.md", ROOT / "docker-compose.yml", ROOT / "README.md"]
SCALED = re.compile(r"(?:swarm stack up|docker compose up)[^\n`]*?--(?:replicas|scale) ([\w-]+)=")


def first_scaled() -> list[tuple[str, str]]:
    """(file, service) of every scaling example: the first service it scales."""
    found = []
    for path in EXAMPLES:
        for match in SCALED.finditer(path.read_text("utf-8")):
            found.append((path.name, match.group(1)))
    return found


@pytest.mark.parametrize(("where", "service"), first_scaled())
def test_each_scaling_example_scales_the_default_kinds_workers(where: str, service: str) -> None:
    compose = load_compose(
        ROOT / "docker-compose.yml", {"REDIS_PASSWORD": "p", "FLOWER_PASSWORD": "f"}
    )
    argv = compose.services[service].command
    queues = set(argv[argv.index("-Q") + 1].split(","))
    default_queue = load_catalog().route(DEFAULT_KIND).queue
    assert default_queue in queues, (
        f"{where}: {service} serves {sorted(queues)}, not {default_queue}"
    )


def test_there_are_examples_to_check() -> None:
    assert {where for where, _ in first_scaled()} >= {"deployment.md", "docker-compose.yml"}
