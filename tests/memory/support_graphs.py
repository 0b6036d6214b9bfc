"""Helpers for the forget and bundle tests: private users written with graphiti-core's classes.

`SupportUsers` seeds a user's graph (the demo builder's graphiti-core records,
written by `yuxi_dash.demo.graph_writer`) and their hit counters in the real Redis
at 127.0.0.1:6379 (db 13), under a user id unique to the test, and removes
whatever is left at the end. `graph_census` counts a graph through graphiti-core's
own FalkorDB driver and classes.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import redis
from falkordb.asyncio import FalkorDB as AsyncFalkorDB
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.errors import GroupsEdgesNotFoundError
from graphiti_core.nodes import CommunityNode, EntityNode, EpisodicNode

from yuxi_dash.access.audit import record_audit
from yuxi_dash.demo.graph_build import build_demo_graph
from yuxi_dash.demo.graphs import write_demo_graph
from yuxi_dash.memory.graph.client import GraphClient
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.support.forget import hit_keys
from yuxi_dash.memory.views.ratification import hits_key
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

REDIS_URL = "redis://127.0.0.1:6379/13"
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def unique_user(stem: str = "fg") -> str:
    return f"{stem}_{uuid.uuid4().hex[:10]}"


class SupportUsers:
    """Seeds users for one test and cleans them up."""

    def __init__(self, client: GraphClient) -> None:
        self.client = client
        self.redis = redis.Redis.from_url(REDIS_URL)
        self.users: list[str] = []

    def seed(self, user_id: str) -> dict[str, Any]:
        graph = build_demo_graph(user_id, now=NOW, community_state="fresh")
        write_demo_graph(self.client, graph)
        for edge_uuid, count in graph.hits.items():
            self.redis.set(hits_key(user_id, edge_uuid), count)
        self.users.append(user_id)
        return {"graph": graph, "hit_keys": len(graph.hits)}

    def counts(self, user_id: str) -> dict[str, int]:
        group = derive_group_id(user_id)
        if not self.client.graph_exists(group):
            return {"nodes": 0, "edges": 0, "keys": len(hit_keys(self.redis, user_id))}
        return {
            "nodes": self.client.ro_value(group, "MATCH (n) RETURN count(n)"),
            "edges": self.client.ro_value(group, "MATCH ()-[e]->() RETURN count(e)"),
            "keys": len(hit_keys(self.redis, user_id)),
        }

    def close(self) -> None:
        for user_id in self.users:
            self.client.delete_graph(derive_group_id(user_id))
            for key in hit_keys(self.redis, user_id):
                self.redis.delete(key)
        self.redis.close()


def graph_census(handle: ServerHandle, group_id: str) -> dict[str, int]:
    """What graphiti-core itself finds for the group: entities, facts, episodes, mentions, communities.

    The driver is built outside any event loop, so it schedules no index build
    (which would re-create a deleted graph).
    """
    db = AsyncFalkorDB(**handle.redis_kwargs())  # type: ignore[arg-type]
    driver = FalkorDriver(falkor_db=db, database=group_id)

    async def edges(kind: Any, groups: list[str]) -> int:
        try:
            return len(await kind.get_by_group_ids(driver, groups))
        except GroupsEdgesNotFoundError:  # graphiti-core's answer for "none"
            return 0

    async def census() -> dict[str, int]:
        try:
            groups = [group_id]
            return {
                "entities": len(await EntityNode.get_by_group_ids(driver, groups)),
                "facts": await edges(EntityEdge, groups),
                "episodes": len(await EpisodicNode.get_by_group_ids(driver, groups)),
                "mentions": await edges(EpisodicEdge, groups),
                "communities": len(await CommunityNode.get_by_group_ids(driver, groups)),
            }
        finally:
            await db.aclose()

    return asyncio.run(census())


def add_correction(settings: Settings, user_id: str, fact_uuid: str) -> str:
    """One `memory_corrections` row (and its audit row) as a correction would leave it."""
    audit_id = record_audit(
        actor="support@example.com",
        action="memory.correct",
        target=f"memory:{user_id}",
        outcome="ok",
        detail={"fact_uuid": fact_uuid},
        settings=settings,
    )
    assert audit_id is not None
    row_id = str(uuid.uuid4())
    snapshot = {"uuid": fact_uuid, "status": "active", "fact_embedding": [0.1, 0.2]}
    with session_scope(settings) as session:
        session.add(
            MemoryCorrection(
                id=row_id,
                audit_id=audit_id,
                actor="support@example.com",
                user_id=user_id,
                group_id=derive_group_id(user_id),
                fact_uuid=fact_uuid,
                action="retract",
                reason="user says this is wrong | see ticket",
                ticket="T-1",
                before={fact_uuid: snapshot},
                after={fact_uuid: {**snapshot, "status": "retracted"}},
                hits_before=0,
            )
        )
    return row_id
