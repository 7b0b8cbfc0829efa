"""`swarm run` against a gateway that holds Moonshot's documented rules for kimi-k2.5 (a
small stub HTTP server in this test): a catalog that sends a temperature is stopped before
anything is queued, with the provider's message and the catalog line to change; the
packaged catalog's requests are taken, and the job succeeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

REFUSAL = "invalid temperature: only 1 is allowed for this model"


class MoonshotRules(BaseHTTPRequestHandler):
    """kimi-k2.5's rules: any temperature but 1 is a 400 (other models take any); thinking
    answers carry reasoning_content. Every chat request body is kept in ``server.bodies``."""

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "kimi-k2.5", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)  # type: ignore[attr-defined]
        if body["model"] == "kimi-k2.5" and body.get("temperature", 1) != 1:
            self._send(400, {"error": {"type": "invalid_request_error", "message": REFUSAL}})
            return
        thinking = body.get("thinking", {}).get("type", "enabled") == "enabled"
        message = {"role": "assistant", "content": "looks fine"}
        if thinking:
            message["reasoning_content"] = "thinking about it"
        usage = {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        self._send(200, {"id": "c", "object": "chat.completion", "created": 0,
                         "model": body["model"], "choices": [choice], "usage": usage})  # fmt: skip

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def gateway() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), MoonshotRules)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def run_inputs(cwd: Path, server: ThreadingHTTPServer, config: Path | None, *lines: str
               ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`swarm run - --json` with one input per line."""
    return swarm(cwd, server, config, ["run", "-", "--json"], *lines)


def swarm(cwd: Path, server: ThreadingHTTPServer, config: Path | None, args: list[str],
          *lines: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """A swarm command with only SWARM_BASE_URL (the stub) and SWARM_CONFIG set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWARM_", "OPENAI_"))}
    env["SWARM_BASE_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    if config is not None:
        env["SWARM_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "swarm.cli.main", *args],
        cwd=cwd,
        env=env,
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=180,
    )


def old_catalog(tmp_path: Path) -> Path:
    """The packaged catalog without its request-field lines: kimi-k2.5 on the plain rules,
    which send temperature 0.2 (what every request carried before)."""
    text = resources.files("swarm.data").joinpath("catalog.toml").read_text("utf-8")
    kept = [line for line in text.splitlines()
            if not line.startswith(("provider =", "thinking =", "thinking_by_kind ="))]  # fmt: skip
    path = tmp_path / "catalog.toml"
    path.write_text("\n".join(kept) + "\n")
    return path


def test_a_refused_field_stops_the_job_before_anything_is_queued(
    tmp_path: Path, gateway: ThreadingHTTPServer
) -> None:
    config = old_catalog(tmp_path)
    done = run_inputs(tmp_path, gateway, config, "first diff", "second diff", "third diff")
    assert done.returncode != 0 and done.stdout == ""
    assert REFUSAL in done.stderr and "HTTP 400" in done.stderr
    assert 'Change sampling (it sends temperature) in [models."kimi-k2.5"]' in done.stderr
    assert str(config) in done.stderr and "Traceback" not in done.stderr
    assert len(gateway.bodies) == 1  # type: ignore[attr-defined]  # the check; no node


def test_the_packaged_catalog_runs_on_moonshots_rules(
    tmp_path: Path, gateway: ThreadingHTTPServer
) -> None:
    done = run_inputs(tmp_path, gateway, None, "first diff", "second diff", "third diff")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["status"], report["succeeded"]) == ("succeeded", 3)
    bodies: list[dict[str, Any]] = gateway.bodies  # type: ignore[attr-defined]
    assert len(bodies) == 1 + 3 + 1  # the check (nodes and merge share a shape), 3 nodes, the merge
    assert all("temperature" not in b and b["thinking"] == {"type": "enabled"} for b in bodies)
    assert report["models"]["kimi-k2.5"]["calls"] == len(bodies)  # the check is billed too
    assert all(n["reasoning"] == "thinking about it" for n in report["nodes"])
    assert "thinking about it" not in json.dumps(bodies[-1]["messages"])  # not aggregated


def test_gateway_check_names_each_refused_shape_and_its_catalog_line(
    tmp_path: Path, gateway: ThreadingHTTPServer
) -> None:
    refused = swarm(tmp_path, gateway, old_catalog(tmp_path), ["gateway", "check"])
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "refused: " in refused.stderr and REFUSAL in refused.stderr
    assert 'in [models."kimi-k2.5"]' in refused.stderr
    assert "request shape(s) of the catalog refused" in refused.stderr
    assert "gemini-2.5-flash (extract): not refused" in refused.stdout
    fine = swarm(tmp_path, gateway, None, ["gateway", "check"])
    assert fine.returncode == 0, fine.stderr
    assert "kimi-k2.5 (default): not refused" in fine.stdout
    assert "kimi-k2.5 (summarize): not refused" in fine.stdout  # thinking off: another shape
