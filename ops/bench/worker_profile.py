"""py-spy on running worker processes: their stacks over one run, and where the time went.

``recording(pids, folder, label)`` samples each process (threads holding the GIL only, so
the shares are of CPU time, not of threads waiting) into ``<folder>/<label>-<pid>.txt``
(py-spy's raw format: one collapsed stack and its sample count a line) until the block
ends; ``top_functions`` sums those files into the share of samples each function was on
the stack for, ``by_package`` into the share each package was running itself (the
stack's last frame: the redis client, the HTTP client, swarm.calls, ...). py-spy comes
from PyPI (``pip install py-spy``); it is not a dependency.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

RATE_HZ = 100
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):\d+\)$")


def py_spy() -> str:
    """The py-spy executable (beside this interpreter, or on PATH)."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    return found


@contextmanager
def recording(pids: Sequence[int], folder: Path, label: str) -> Iterator[list[Path]]:
    """py-spy recording each of ``pids`` while the block runs; the files it writes."""
    folder.mkdir(parents=True, exist_ok=True)
    outs = [folder / f"{label}-{pid}.txt" for pid in pids]
    spies = []
    for pid, out in zip(pids, outs, strict=True):
        argv = [py_spy(), "record", "--nonblocking", "--gil", "-r", str(RATE_HZ), "-f", "raw",
                "-o", str(out), "--pid", str(pid)]  # fmt: skip
        log = out.with_suffix(".log").open("w")
        spies.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    try:
        yield outs
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file when interrupted
        for spy in spies:
            spy.wait(60)


def top_functions(
    paths: Sequence[Path], prefixes: tuple[str, ...] = ("swarm/", "workers/"), top: int = 15
) -> list[tuple[str, float]]:
    """The ``top`` functions of files under ``prefixes`` by share of samples they were on
    the stack for (inclusive), from py-spy raw files."""
    total, on_stack = 0, Counter[str]()
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text("utf-8", errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            samples = int(count)
            total += samples
            on_stack.update(dict.fromkeys(_ours(stack, prefixes), samples))
    return [(name, n / total) for name, n in on_stack.most_common(top)] if total else []


def by_package(paths: Sequence[Path], top: int = 12) -> list[tuple[str, float]]:
    """The ``top`` packages by share of samples whose innermost frame is theirs (``swarm``
    split by subpackage, the standard library by module)."""
    total, running = 0, Counter[str]()
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text("utf-8", errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            samples = int(count)
            total += samples
            match = FRAME.match(stack.rsplit(";", 1)[-1])
            running[_package(match["file"]) if match else "?"] += samples
    return [(name, n / total) for name, n in running.most_common(top)] if total else []


def _package(file: str) -> str:
    parts = file.split("/")
    if parts[0] == "swarm" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else f"{file} (stdlib)"


def _ours(stack: str, prefixes: tuple[str, ...]) -> set[str]:
    names = set()
    for frame in stack.split(";"):
        match = FRAME.match(frame)
        if match and match["file"].startswith(prefixes):
            names.add(f"{match['func']} ({match['file']})")
    return names
