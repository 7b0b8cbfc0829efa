"""``swarm stack up|down|status``: the compose stack as local processes."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from swarm.cli.decorators import one_line_errors
from swarm.errors import ConfigError
from swarm.stack import DEFAULT_RUN_DIR, DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from swarm.stack.state import ProcessState

_DIR = click.option(
    "--dir",
    "run_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_RUN_DIR,
    show_default=True,
    help="Folder of the stack's state file, logs and Redis data.",
)


def _pairs(_: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or not number.isdigit():
            raise click.BadParameter(f"expected SERVICE=N, got {value!r}", param=param)
        out[name] = int(number)
    return out


@click.group(name="stack")
def stack_group() -> None:
    """Run docker-compose.yml's services as local processes (no Docker needed)."""


@stack_group.command(name="up")
@click.option(
    "-f",
    "--file",
    "compose_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docker-compose.yml"),
    show_default=True,
    help="The compose file.",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Variables for the compose file [default: .env beside it]; the shell's win.",
)
@_DIR
@click.option("--with-sim", is_flag=True, help="Also start the simulator (compose profile sim).")
@click.option("--replicas", multiple=True, callback=_pairs, help="SERVICE=N processes (repeat).")
@click.option("--port", "ports", multiple=True, callback=_pairs, help="SERVICE=PORT (repeat).")
@click.option("--timeout", "timeout_s", type=float, default=DEFAULT_TIMEOUT_S, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the started processes as JSON.")
@one_line_errors
def up_command(
    compose_file: Path,
    env_file: Path | None,
    run_dir: Path,
    with_sim: bool,
    replicas: dict[str, int],
    ports: dict[str, int],
    timeout_s: float,
    as_json: bool,
) -> None:
    """Start redis, Flower and the workers (and the simulator) from the compose file."""
    from swarm.stack.launch import stack_up

    if not compose_file.is_file():
        raise ConfigError(f"no compose file {compose_file} (use -f)")
    state = stack_up(
        compose_file,
        run_dir,
        env_file=env_file or compose_file.parent / ".env",
        profiles=("sim",) if with_sim else (),
        replicas=replicas,
        ports=ports,
        timeout_s=timeout_s,
    )
    _show([(p, True) for p in state.processes], as_json)
    if not as_json:
        _hints(state.processes, env_file or compose_file.parent / ".env")


@stack_group.command(name="down")
@_DIR
@one_line_errors
def down_command(run_dir: Path) -> None:
    """Stop exactly the processes `up` started (workers first)."""
    from swarm.stack.runner import down

    stopped = down(run_dir)
    click.echo(f"stopped {len(stopped)} process(es)" if stopped else "nothing was running")


@stack_group.command(name="status")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@one_line_errors
def status_command(run_dir: Path, as_json: bool) -> None:
    """What the stack runs: pid, state, ports and log of each process."""
    from swarm.stack.runner import status

    rows = status(run_dir)
    if not rows and not as_json:
        click.echo(f"no stack in {run_dir}")
        return
    _show(rows, as_json)


def _show(rows: list[tuple[ProcessState, bool]], as_json: bool) -> None:
    from rich.table import Table

    from swarm.cli.render import stdout_console

    if as_json:
        data = [{**p.model_dump(mode="json"), "running": running} for p, running in rows]
        click.echo(json.dumps(data, indent=2))
        return
    table = Table("process", "pid", "state", "port", "metrics port")
    for proc, running in rows:
        table.add_row(
            proc.name,
            str(proc.pid),
            "running" if running else "[red]exited[/red]",
            str(proc.port or ""),
            str(proc.metrics_port or ""),
        )
    console = stdout_console()
    console.print(table)
    if rows:
        console.print(f"logs: {Path(rows[0][0].log).parent}/<process>.log", soft_wrap=True)


def _hints(processes: tuple[ProcessState, ...], env_file: Path) -> None:
    """The lines a user pastes to use the stack from this shell: the variables of
    ``env_file`` first when the shell has no REDIS_PASSWORD (the URL names it, unexpanded:
    it is never printed)."""
    port = {p.service: p.port for p in processes if p.port}
    if "redis" in port:
        if "REDIS_PASSWORD" not in os.environ:
            click.echo(f"set -a && . {shlex.quote(str(env_file))} && set +a   # REDIS_PASSWORD")
        click.echo(f"export SWARM_BROKER_URL=redis://:$REDIS_PASSWORD@127.0.0.1:{port['redis']}/0")
    if "sim" in port:
        click.echo(f"export SWARM_BASE_URL=http://127.0.0.1:{port['sim']}/v1")
    if "flower" in port:
        click.echo(f"Flower: http://127.0.0.1:{port['flower']}  (FLOWER_USER / FLOWER_PASSWORD)")
