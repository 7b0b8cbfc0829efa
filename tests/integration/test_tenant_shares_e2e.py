"""End to end: two tenants' jobs on one saturated model, with real workers, get the model's
tokens in the ratio of their catalog weights although one's answers are ten times longer."""

from __future__ import annotations

import time
from pathlib import Path

import procs
import pytest
from stack import Stack, stack_fixture

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.redis import RedisAdmission
from swarm.catalog import load_catalog
from swarm.client import SwarmClient, SwarmHandle
from swarm.records import InputItem

pytestmark = pytest.mark.integration

MODEL = "kimi-k2.5"
QUEUE = f"llm.{MODEL}"

# Generation mode: an answer takes 60 ms + its length / 500 tokens/s (a short answer 100 ms,
# a long one 460 ms): long enough that the model's 4 slots stay the bottleneck on a loaded
# machine. At 20 ms + 1,000 tokens/s a short call took about what a loaded worker spends
# between two calls, the slots idled, and work conservation rightly gave them to the other
# tenant (a/b 1.2-1.3 in full-suite runs).
stack = stack_fixture(["--ttft-ms", "60", "--tokens-per-s", "500"], scope="function")


def catalog(folder: Path) -> Path:
    path = folder / "catalog.toml"
    path.write_text(
        f'[models."{MODEL}"]\ngateway_name = "{MODEL}"\nqueue = "{QUEUE}"\n'
        "input_per_mtok_usd = 1.5\noutput_per_mtok_usd = 0.6\ncached_input_per_mtok_usd = 0.15\n"
        "rpm = 60000\ntpm = 100000000\nmax_inflight = 4\n"
        "context_window = 262144\nmax_tokens = 220\n\n"
        f'[routing]\ndefault = ["{MODEL}"]\naggregate = ["{MODEL}"]\n\n'
        "[tenants]\nteam-a = 3\n",  # team-b is not listed: it weighs 1
        "utf-8",
    )
    return path


def items(n: int, answer_tokens: int) -> list[InputItem]:
    marker = f"[[sim:answer_tokens={answer_tokens}]]"
    return [InputItem(ref=f"in-{i}", text=f"input {i} {marker}") for i in range(n)]


def tokens(client: SwarmClient, handle: SwarmHandle) -> int:
    line = client.store.ledger(handle.id).get(MODEL)
    return 0 if line is None else line.usage.total_tokens


def test_two_tenants_get_tokens_by_weight_on_a_saturated_model(
    stack: Stack, tmp_logs: Path
) -> None:
    path = catalog(tmp_logs)
    env = {**stack.env, "SWARM_CONFIG": str(path)}
    stack.workers.append(procs.start_celery_worker(env, QUEUE, 56, "fair@%h", tmp_logs))
    client = SwarmClient.from_settings(stack.settings(config=path))
    # team-a: short answers, weight 3; team-b: answers ten times longer, weight 1
    a = client.submit(items(160, 20), "Summarise", tenant="team-a")
    b = client.submit(items(40, 200), "Summarise", tenant="team-b")
    deadline = time.monotonic() + 180
    while a.progress().done < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    got_a, got_b = tokens(client, a), tokens(client, b)  # the ledgers, while both are busy
    assert a.progress().done >= 100 and not b.progress().done >= 40, "one job ran alone"
    assert 3 * 0.8 <= got_a / got_b <= 3 * 1.25, (got_a, got_b)
    store_url = procs.with_db(stack.broker_url, 1)  # the job store's Redis: broker db + 1
    admission = RedisAdmission.from_url(store_url, stack.base_url, AdmissionPolicy())
    rows = {r.tenant: r for r in admission.counters(load_catalog(path).model(MODEL)).tenants}
    assert (rows["team-a"].weight, rows["team-b"].weight) == (3.0, 1.0)
    assert (rows["team-a"].target, rows["team-b"].target) == (0.75, 0.25)
    for handle in (a, b):
        assert handle.wait(timeout=180).to_dict()["status"] == "succeeded"
