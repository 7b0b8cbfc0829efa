"""A hosted call's first admission permit rides in its claim's round trip
(swarm.store.companion): one round trip fewer per call, with every permit still given back
and the admission keys where the controller keeps them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import procs
import pytest
import redis
import redis.connection

from swarm.calls.admission import AdmissionPolicy
from swarm.calls.admission.redis import RedisAdmission
from swarm.calls.pipeline import run_call
from swarm.calls.request import CallRequest
from swarm.calls.runtime import Runtime
from swarm.catalog import load_catalog
from swarm.records import NodeEnvelope
from swarm.settings import load_settings
from swarm.store.heartbeat import LeaseKeeper
from swarm.store.redis import RedisJobStore

pytestmark = pytest.mark.integration
GATEWAY = "http://gw.test/v1"


class RoundTrips:
    """Counts what redis-py sends (one per command or pipeline) while ``on``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on, self.count = False, 0
        send = redis.connection.AbstractConnection.send_packed_command

        def counted(conn: Any, command: Any, check_health: bool = True) -> None:
            self.count += int(self.on)

            send(conn, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> RoundTrips:
    return RoundTrips(monkeypatch)


ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
}  # fmt: skip


class Gateway:
    """An in-process gateway answering every request at once; keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=ANSWER)

    def client(self) -> openai.OpenAI:
        http = httpx2.Client(transport=httpx2.MockTransport(self.answer))
        return openai.OpenAI(base_url=GATEWAY, api_key="k", max_retries=0, http_client=http)


@pytest.fixture
def gateway() -> Gateway:
    return Gateway()


def runtime(url: str, admission_url: str, gateway: Gateway) -> Runtime:
    settings = load_settings(broker_url=url, base_url=GATEWAY, api_key="k")
    store = RedisJobStore.from_url(url, 3600)
    return Runtime(
        settings=settings,
        catalog=load_catalog(),
        store=store,
        leases=LeaseKeeper(store, settings.lease_s),  # claims are leases, as in a worker
        client=gateway.client(),
        admission=RedisAdmission.from_url(admission_url, GATEWAY, AdmissionPolicy()),
    )


@pytest.fixture
def rt(redis_url: str, gateway: Gateway) -> Iterator[Runtime]:
    yield runtime(redis_url, redis_url, gateway)


def request(rt: Runtime, slot: str = "n1") -> CallRequest:
    far = {"rpm": 6_000_000, "tpm": 100_000_000, "rps": None}  # no booked slots to wait for
    model = rt.catalog.model("kimi-k2.5").model_copy(update=far)
    return CallRequest.of("j1", slot, model, [{"role": "user", "content": "hi"}], 64)


def inflight(rt: Runtime) -> int:
    return rt.admission.counters(rt.catalog.model("kimi-k2.5")).inflight


def test_a_hosted_call_claims_and_is_admitted_in_one_round_trip(
    rt: Runtime, trips: RoundTrips, gateway: Gateway
) -> None:
    run_call(rt, request(rt, "warm-up"))  # connections made, scripts loaded
    trips.on = True
    result = run_call(rt, request(rt))
    trips.on = False
    assert result.answer is not None and result.answer.content == "fine"
    # claim + first acquire, the permit's finish, the ledger line with the answer (which
    # ends the claim's lease)
    assert trips.count == 3
    assert len(gateway.requests) == 2 and inflight(rt) == 0


def test_a_reused_answer_gives_the_prefetched_permit_back(rt: Runtime, gateway: Gateway) -> None:
    run_call(rt, request(rt))
    again = run_call(rt, request(rt))
    assert again.reused and len(gateway.requests) == 1
    assert inflight(rt) == 0


def test_a_call_waiting_for_another_runs_claim_holds_no_permit(
    rt: Runtime, gateway: Gateway
) -> None:
    assert rt.store.claim("j1", "n1", "another run", 0.3)  # lapses while this one waits
    result = run_call(rt, request(rt))
    assert result.answer is not None and len(gateway.requests) == 1
    assert inflight(rt) == 0


def test_a_flushed_script_is_loaded_again_and_the_call_admitted(
    rt: Runtime, redis_url: str, gateway: Gateway
) -> None:
    redis.Redis.from_url(redis_url).script_flush()
    result = run_call(rt, request(rt))
    assert result.answer is not None and len(gateway.requests) == 1
    assert inflight(rt) == 0


def test_admission_on_another_database_is_asked_there(
    redis_url: str, gateway: Gateway, trips: RoundTrips
) -> None:
    other = procs.with_db(redis_url, 5)
    rt = runtime(redis_url, other, gateway)
    run_call(rt, request(rt, "warm-up"))  # connections made, scripts loaded
    trips.on = True
    result = run_call(rt, request(rt))
    trips.on = False
    assert result.answer is not None
    assert trips.count == 4  # the acquire could not ride in the store's pipeline
    assert redis.Redis.from_url(redis_url).keys("*llm*") == []
    assert redis.Redis.from_url(other).keys("*llm*") != []
    assert inflight(rt) == 0


# -- the answered attempt's finish rides with the node's envelope (CallSession.ride_with_answer) --


def held_request(rt: Runtime, slot: str = "n1") -> CallRequest:
    """A plain node's own call: its answer is held for the envelope's write."""
    model = request(rt, slot).model
    messages = [{"role": "user", "content": f"hi {slot}"}]
    return CallRequest.of("j1", slot, model, messages, 64, hold_answer=True)


def envelope(node_id: str) -> NodeEnvelope:
    return NodeEnvelope(node_id=node_id, input_ref="r", model="kimi-k2.5", status="ok",
                        content="fine")  # fmt: skip


def test_a_held_answer_carries_its_permits_finish_into_the_envelopes_round_trip(
    rt: Runtime, trips: RoundTrips
) -> None:
    warm_up = run_call(rt, held_request(rt, "warm-up"))  # connections made, scripts loaded
    assert warm_up.held is not None
    warm_up.held.commit(envelope("warm-up"))
    trips.on = True
    result = run_call(rt, held_request(rt))
    trips.on, calling, trips.count = False, trips.count, 0
    assert result.held is not None and result.held.answer.companion is not None
    assert inflight(rt) == 1  # the permit waits for the envelope's write
    trips.on = True
    assert result.held.commit(envelope("n1"))
    trips.on = False
    # the call: claim + first acquire; the node's end: envelope, answer and permit together
    assert (calling, trips.count) == (1, 1)
    assert inflight(rt) == 0
    assert rt.store.ledger("j1")["kimi-k2.5"].calls == 2
    assert rt.store.envelope("j1", "n1") == envelope("n1")


def test_a_held_answer_written_alone_still_finishes_its_permit(rt: Runtime) -> None:
    result = run_call(rt, held_request(rt))
    assert result.held is not None and inflight(rt) == 1
    result.held.commit()  # an error before the envelope
    assert inflight(rt) == 0 and rt.store.ledger("j1")["kimi-k2.5"].calls == 1


def test_a_carried_finish_on_a_flushed_script_runs_again_alone(rt: Runtime, redis_url: str) -> None:
    result = run_call(rt, held_request(rt))
    assert result.held is not None
    redis.Redis.from_url(redis_url).script_flush()  # NOSCRIPT for both scripts in the pipeline
    assert result.held.commit(envelope("n1"))
    assert inflight(rt) == 0 and rt.store.envelope("j1", "n1") == envelope("n1")


def test_a_finish_on_another_database_runs_there_alone(
    redis_url: str, gateway: Gateway, trips: RoundTrips
) -> None:
    rt = runtime(redis_url, procs.with_db(redis_url, 5), gateway)
    warm_up = run_call(rt, held_request(rt, "warm-up"))  # connections made, scripts loaded
    assert warm_up.held is not None
    warm_up.held.commit(envelope("warm-up"))
    result = run_call(rt, held_request(rt))
    assert result.held is not None and inflight(rt) == 1
    trips.on = True
    assert result.held.commit(envelope("n1"))
    trips.on = False
    assert trips.count == 2 and inflight(rt) == 0
    assert redis.Redis.from_url(redis_url).keys("*llm*") == []
