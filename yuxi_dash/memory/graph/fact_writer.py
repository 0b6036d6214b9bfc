"""Reading and writing one user's facts with graphiti-core's own classes and driver.

Every correction writes through `edge.save(driver)` / `edge.delete(driver)` on
graphiti-core's `FalkorDriver` built with `database=derive_group_id(user_id)`
(the user's graph) over an asyncio connection to the read client's server.

An edge is read with graphiti-core's return columns and record parser
(`get_entity_edge_from_record`) plus its embedding, by a MATCH the relationship
index serves (`EDGE_BY_UUID`), falling back to `EntityEdge.get_by_uuid` +
`load_fact_embedding`. `save` writes `vecf32(fact_embedding)`, so an edge is
always read with its embedding first: a correction never drops it.

`FactWriter.run(work)` runs one async job on a fresh event loop and closes the
connection at its end (the dashboard and the CLI are synchronous).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis
from falkordb.asyncio import FalkorDB as AsyncFalkorDB
from graphiti_core.driver.driver import GraphProvider
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge, get_entity_edge_from_record
from graphiti_core.errors import EdgeNotFoundError
from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query

from yuxi_dash.errors import MemoryUnavailable
from yuxi_dash.memory.graph.groups import GROUP_PREFIX
from yuxi_dash.memory.graph.server import ServerHandle, ensure_server
from yuxi_dash.settings import Settings

T = TypeVar("T")


class FactWriter:
    """graphiti-core's FalkorDriver on one user's graph (the graph named by the group id)."""

    def __init__(
        self, settings: Settings, group_id: str, *, handle: ServerHandle | None = None
    ) -> None:
        if not group_id.startswith(GROUP_PREFIX):
            raise ValueError("graph names come from derive_group_id")
        self.group_id = group_id
        handle = handle or ensure_server(settings)  # the read client's server when given
        kwargs: dict[str, Any] = dict(handle.redis_kwargs())
        kwargs["socket_timeout"] = 30
        kwargs["socket_connect_timeout"] = 3
        self._db = AsyncFalkorDB(**kwargs)
        # Built outside any running loop, so the driver schedules no index build of its own.
        self.driver = FalkorDriver(falkor_db=self._db, database=group_id)

    def run(self, work: Callable[[FalkorDriver], Awaitable[T]]) -> T:
        async def job() -> T:
            try:
                return await work(self.driver)
            finally:
                await self._db.aclose()

        try:
            return asyncio.run(job())
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise MemoryUnavailable(
                f"FalkorDB is unavailable ({type(exc).__name__}); nothing was changed"
            ) from exc


# graphiti-core's own return columns and record parser, behind a MATCH the relationship
# index serves: graphiti-core's get_by_uuid and load_fact_embedding match
# `(n:Entity)-[e:RELATES_TO {uuid}]->(m:Entity)`, which FalkorDB plans as a scan of every
# Entity and its edges (1.4 s each on the 200,000-fact bench graph, bench/memory_desk.py).
EDGE_BY_UUID = (
    "MATCH (n)-[e:RELATES_TO {uuid: $uuid}]->(m) RETURN "
    + get_entity_edge_return_query(GraphProvider.FALKORDB)
    + ", e.fact_embedding AS fact_embedding"
)


async def load_edge(driver: FalkorDriver, uuid: str) -> EntityEdge | None:
    """The edge with its embedding, or None when graphiti-core finds no such edge.

    Read through the driver with graphiti-core's own columns and parser
    (`get_entity_edge_from_record`); when the index path misses (the drift after
    a restart), graphiti-core's `EntityEdge.get_by_uuid` has the last word.
    """
    records, _, _ = await driver.execute_query(EDGE_BY_UUID, uuid=uuid, routing_="r")
    if records:
        return get_entity_edge_from_record(records[0], driver.provider)
    try:
        edge = await EntityEdge.get_by_uuid(driver, uuid)
    except EdgeNotFoundError:
        return None
    try:
        await edge.load_fact_embedding(driver)
    except EdgeNotFoundError:
        edge.fact_embedding = None
    return edge


async def save_edge(driver: FalkorDriver, edge: EntityEdge) -> None:
    await edge.save(driver)


async def delete_edge(driver: FalkorDriver, uuid: str) -> None:
    edge = await load_edge(driver, uuid)
    if edge is not None:
        await edge.delete(driver)
