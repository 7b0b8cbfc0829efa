"""The simulator's account (swarm.sim.account) over real HTTP: a balance that runs out and
is topped up, and each provider's refusals, read back by swarm's classification."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from swarm.calls.retries import one_line
from swarm.calls.retry_policy import classify
from swarm.records import ErrorKind
from swarm.sim import RunningSim, SimConfig, start_in_thread
from swarm.sim.account import AccountConfig

pytestmark = pytest.mark.integration


def _client(sim: RunningSim) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0, timeout=30)


def _chat(client: openai.OpenAI, text: str = "hi") -> Any:
    messages = [{"role": "user", "content": text}]
    return client.chat.completions.create(model="kimi-k2.5", messages=messages)  # type: ignore[arg-type]


def _refusal(client: openai.OpenAI, text: str = "hi") -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        _chat(client, text)
    return caught.value


def _post(sim: RunningSim, path: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST ``data`` as JSON (None: GET) to the simulator's ``path``."""
    url = sim.base_url.removesuffix("/v1") + path
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


@pytest.fixture
def sim() -> Iterator[RunningSim]:
    with start_in_thread(SimConfig(account=AccountConfig(balance_answers=2))) as running:
        yield running


def test_the_balance_runs_out_after_n_answers_and_is_topped_up(sim: RunningSim) -> None:
    client = _client(sim)
    _chat(client), _chat(client)
    refused = [_refusal(client) for _ in range(3)]
    assert {r.status_code for r in refused} == {429}
    assert {classify(r) for r in refused} == {ErrorKind.INSUFFICIENT_BALANCE}
    assert "insufficient balance" in one_line(refused[0])
    account = _post(sim, "/stats")["account"]
    assert account["refused"] == {"balance": 3} and account["first_refusal_at"] == 3
    _post(sim, "/account", {"balance_answers": None})  # the account is paid
    assert _chat(client).choices[0].message.content


@pytest.mark.parametrize("error_format", ["moonshot", "openai", "deepseek"])
@pytest.mark.parametrize(
    ("marker", "kind"),
    [
        ("balance", ErrorKind.INSUFFICIENT_BALANCE),
        ("tpd", ErrorKind.DAILY_LIMIT),
        ("overloaded", ErrorKind.OVERLOADED),
        ("content_filter", ErrorKind.CONTENT_FILTER),
    ],
)
def test_each_format_s_refusals_are_told_apart(
    error_format: str, marker: str, kind: ErrorKind
) -> None:
    config = SimConfig(account=AccountConfig(error_format=error_format))  # type: ignore[arg-type]
    with start_in_thread(config) as sim:
        refused = _refusal(_client(sim), f"x [[sim:provider_error={marker}]]")
    assert classify(refused) is kind
