"""`--tenant` (or SWARM_TENANT) reaches the submission of `swarm run`, `review` and
`analyze` (the client stores it in the job spec: tests/unit/client); without it a job is the
default tenant's."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from swarm.catalog import load_catalog
from swarm.cli.main import main
from swarm.records import DEFAULT_TENANT
from swarm.settings import load_settings


class Client:
    """What the commands' submit step is given: records the tenant it asks for."""

    def __init__(self, seen: list[str]) -> None:
        self.settings, self.catalog, self.seen = load_settings(), load_catalog(), seen

    def submit(self, *args: Any, tenant: str = "<none>", **options: Any) -> None:
        self.seen.append(tenant)

    plan = submit


@pytest.fixture
def tenants(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tenant of every job a command submits."""
    seen: list[str] = []

    def execute(settings: Any, submit: Any, **options: Any) -> None:
        submit(Client(seen))

    monkeypatch.setattr("swarm.cli.execute.execute", execute)
    monkeypatch.delenv("SWARM_TENANT", raising=False)
    return seen


def run(argv: list[str], env: dict[str, str] | None = None) -> None:
    result = CliRunner().invoke(main, [*argv, "--json"], env=env)
    assert result.exit_code == 0, (result.output, result.exception)


def test_run_sends_the_tenant_with_the_job(tenants: list[str], tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("an input", "utf-8")
    run(["run", str(path), "--tenant", "team-a"])
    run(["run", str(path)], env={"SWARM_TENANT": "team-b"})
    run(["run", str(path)])
    assert tenants == ["team-a", "team-b", DEFAULT_TENANT]


def test_review_and_analyze_send_the_tenant(tenants: list[str], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.txt").write_text("one\n", "utf-8")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    run(["review", str(repo), "--last", "1", "--tenant", "team-r"])
    doc = tmp_path / "doc.md"
    doc.write_text("# A document\n\nSome text.\n", "utf-8")
    run(["analyze", str(doc), "--query", "What is it?", "--tenant", "team-q"])
    assert tenants == ["team-r", "team-q"]


def test_the_cli_default_is_the_records_default() -> None:
    from swarm.cli.decorators import TENANT

    def command() -> None: ...

    option = TENANT(command).__click_params__[0]  # type: ignore[attr-defined]
    assert option.default == DEFAULT_TENANT
