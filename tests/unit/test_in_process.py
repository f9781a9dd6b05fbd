"""LocalHandle and construct: deployment classes called in-process (topologies fused and
colocated); ColocatedModel: the ingress of a colocated graph."""

import asyncio

import pytest

from deployments.graph_nodes import LocalHandle, TicketPath
from deployments.nodes.in_process import ColocatedModel, construct
from tests.harness import as_handle


class Stage:
    async def __init__(self, offset: int):
        await asyncio.sleep(0)
        self.offset = offset

    async def add(self, x: int) -> int:
        await asyncio.sleep(0)
        return x + self.offset

    def name(self) -> str:
        return "stage"

    async def fail(self) -> None:
        raise KeyError("boom")

    async def hang(self) -> None:
        await asyncio.sleep(60)


def test_construct_awaits_an_async_init_and_calls_go_through_remote():
    async def main():
        handle = LocalHandle(await construct(Stage, 2))
        assert await handle.add.remote(3) == 5
        assert await handle.name.remote() == "stage"
        with pytest.raises(KeyError):
            await handle.fail.remote()
        pending = handle.hang.remote()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pending, 0.01)
        assert pending.cancelled()

    asyncio.run(main())


def test_construct_takes_a_plain_init_too():
    class Plain:
        def __init__(self, v):
            self.v = v

    assert asyncio.run(construct(Plain, 4)).v == 4


class OwnModel:
    """A model replica object as a colocated ingress holds it."""

    def __init__(self, healthy: bool = True):
        self.healthy, self.shutdowns = healthy, 0

    async def check_health(self) -> None:
        if not self.healthy:
            raise RuntimeError("engine dead")

    async def predict(self, prompt, request_id, tenant=None) -> str:
        return f"{prompt}/{request_id}/{tenant}"

    def shutdown(self) -> None:
        self.shutdowns += 1


class Front(ColocatedModel):
    def __init__(self, own: OwnModel | None):
        # Colocated, the model is its own object; otherwise a model deployment's handle.
        model = LocalHandle(own) if own is not None else as_handle(object())
        self._path = TicketPath(
            antispam=as_handle(object()), edge_router=as_handle(object()), tokenizer=as_handle(object()), model=model
        )


def test_a_colocated_ingress_is_as_healthy_as_its_engine_and_answers_for_the_stable_side():
    async def main():
        await Front(OwnModel()).check_health()
        await Front(None).check_health()  # fused and chain: the model's health is its own deployment's
        with pytest.raises(RuntimeError, match="engine dead"):
            await Front(OwnModel(healthy=False)).check_health()
        assert await Front(OwnModel()).predict("text", "golden-stable-0") == "text/golden-stable-0/None"

    asyncio.run(main())


def test_a_colocated_ingress_stops_its_engine_when_serve_stops_it():
    own = OwnModel()
    front = Front(own)
    front.__del__()
    assert own.shutdowns == 1
    Front(None).__del__()  # nothing to stop
