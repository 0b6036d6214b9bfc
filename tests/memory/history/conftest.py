"""Shared pieces of the memory-history tests: LaunchDarkly test data with memory on, a door."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from ldclient.integrations.test_data import TestData

from tests.fixtures.desk import DESK_USER, message_at
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.views.gate import MemoryAccess, open_view

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
REASON = "the user says this never happened (ticket call)"
# the desk graph's clock (tests/fixtures/desk.py): facts written 09:02-09:05, two retired 09:06
BEFORE = message_at(3) + timedelta(seconds=30)  # 09:03:30: dark, caching, tentative
BETWEEN = message_at(5) + timedelta(seconds=30)  # 09:05:30: + contractor, laptop, full-time
AFTER = message_at(7)  # 09:07: contractor and laptop retired by the 09:04 episode


@pytest.fixture
def evaluator(memory_settings) -> Iterator[FlagEvaluator]:
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    ev = FlagEvaluator.from_test_data(memory_settings, data)
    yield ev
    ev.close()


@pytest.fixture
def door(memory_settings, evaluator):
    def open_(view: str = "as_of", user_id: str = DESK_USER) -> MemoryAccess:
        return open_view(user_id, view, actor=VIEWER, settings=memory_settings, evaluator=evaluator)

    return open_


def utc_now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def platform_set(desk_graph, falkordb_server, memory_settings):
    """Change a desk fact in place as the platform does (`forgotten_at`, ratification):
    `platform_set(fact_key, **properties)`; a label-free traversal from the user entity."""
    from tests.fixtures.graph import make_client

    def set_(fact_key: str, **properties: object) -> None:
        client = make_client(falkordb_server, memory_settings)
        try:
            for name, value in properties.items():
                client.write(
                    desk_graph.group_id,
                    "MATCH (n:Entity {uuid: $source})-[e:RELATES_TO]->() "
                    f"WHERE toString(e.uuid) = $uuid SET e.{name} = $value",
                    {
                        "source": desk_graph.entities["user"],
                        "uuid": desk_graph.facts[fact_key],
                        "value": value,
                    },
                )
        finally:
            client.close()

    return set_
