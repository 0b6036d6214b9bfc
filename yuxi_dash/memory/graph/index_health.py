"""Index health: is the relationship index still telling the truth?

After a restart from the RDB, FalkorDB's relationship range index can lose the
outgoing edges of internal node 0 (often the user, a hub). The check counts the
user's facts twice: through the index path graphiti-core takes (labeled,
group_id-filtered) and label-free (`()-[e:RELATES_TO]->()`); any difference is
drift. The full index-path count is slow, so pages open with
`probe_index_health`: the same two counts for node 0 only; the full check runs
on request. The repair (admin only, audited, in `memory.views.gated_views`) drops every
RELATIONSHIP index listed by `CALL db.indexes()`, builds it again and waits for
the new indexes to become operational.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from yuxi_dash.memory.graph import queries
from yuxi_dash.memory.graph.client import GraphClient

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LIST_INDEXES = "CALL db.indexes() YIELD label, properties, types, entitytype, status"
_OPERATIONAL_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class RelationshipIndex:
    label: str
    range_fields: tuple[str, ...]
    fulltext_fields: tuple[str, ...]
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "range": list(self.range_fields),
            "fulltext": list(self.fulltext_fields),
            "status": self.status,
        }


@dataclass(frozen=True)
class IndexHealth:
    group_id: str
    index_path_facts: int
    label_free_facts: int
    relationship_indexes: list[RelationshipIndex] = field(default_factory=list)

    @property
    def drift(self) -> int:
        return self.label_free_facts - self.index_path_facts

    @property
    def healthy(self) -> bool:
        return self.drift == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": "full",
            "index_path_facts": self.index_path_facts,
            "label_free_facts": self.label_free_facts,
            "drift": self.drift,
            "healthy": self.healthy,
            "relationship_indexes": [i.to_dict() for i in self.relationship_indexes],
        }


@dataclass(frozen=True)
class IndexProbe:
    """Index health from node 0 alone (after a restart the edges lost are node 0's outgoing ones)."""

    group_id: str
    probe_index_path_facts: int
    probe_label_free_facts: int
    label_free_facts: int
    relationship_indexes: list[RelationshipIndex] = field(default_factory=list)

    @property
    def drift(self) -> int:
        return self.probe_label_free_facts - self.probe_index_path_facts

    @property
    def healthy(self) -> bool:
        return self.drift == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": "probe",
            "probe_index_path_facts": self.probe_index_path_facts,
            "probe_label_free_facts": self.probe_label_free_facts,
            "label_free_facts": self.label_free_facts,
            "drift": self.drift,
            "healthy": self.healthy,
            "relationship_indexes": [i.to_dict() for i in self.relationship_indexes],
        }


def relationship_indexes(client: GraphClient, group_id: str) -> list[RelationshipIndex]:
    out = []
    for row in client.ro_rows(group_id, LIST_INDEXES):
        if row.get("entitytype") != "RELATIONSHIP":
            continue
        types: dict[str, list[str]] = dict(row.get("types") or {})
        range_fields = tuple(f for f, kinds in types.items() if "RANGE" in kinds)
        fulltext_fields = tuple(f for f, kinds in types.items() if "FULLTEXT" in kinds)
        out.append(
            RelationshipIndex(
                label=str(row["label"]),
                range_fields=range_fields,
                fulltext_fields=fulltext_fields,
                status=str(row.get("status", "")),
            )
        )
    return out


def check_index_health(client: GraphClient, group_id: str) -> IndexHealth:
    return IndexHealth(
        group_id=group_id,
        index_path_facts=queries.relates_to_count_index_path(client, group_id),
        label_free_facts=queries.relates_to_count_label_free(client, group_id),
        relationship_indexes=relationship_indexes(client, group_id),
    )


def probe_index_health(client: GraphClient, group_id: str) -> IndexProbe:
    """The cheap check: node 0's facts via the index path vs label-free, plus the total."""
    via_index, label_free = queries.index_path_probe(client, group_id)
    return IndexProbe(
        group_id=group_id,
        probe_index_path_facts=via_index,
        probe_label_free_facts=label_free,
        label_free_facts=queries.relates_to_count_label_free(client, group_id),
        relationship_indexes=relationship_indexes(client, group_id),
    )


def _ident(name: str) -> str:
    """Labels and property names cannot be parameters: accept plain identifiers only."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"refusing to rebuild an index on a non-identifier name {name!r}")
    return name


def rebuild_relationship_indexes(client: GraphClient, group_id: str) -> list[str]:
    """Drop and recreate every RELATIONSHIP index; returns the statements run."""
    statements: list[str] = []
    indexes = relationship_indexes(client, group_id)
    for index in indexes:
        label = _ident(index.label)
        for name in index.range_fields:
            statements.append(f"DROP INDEX FOR ()-[e:{label}]-() ON (e.{_ident(name)})")
        for name in index.fulltext_fields:
            statements.append(f"DROP FULLTEXT INDEX FOR ()-[e:{label}]-() ON (e.{_ident(name)})")
    for index in indexes:
        label = _ident(index.label)
        if index.range_fields:
            fields = ", ".join(f"e.{_ident(n)}" for n in index.range_fields)
            statements.append(f"CREATE INDEX FOR ()-[e:{label}]-() ON ({fields})")
        if index.fulltext_fields:
            fields = ", ".join(f"e.{_ident(n)}" for n in index.fulltext_fields)
            statements.append(f"CREATE FULLTEXT INDEX FOR ()-[e:{label}]-() ON ({fields})")
    for statement in statements:
        client.write(group_id, statement, timeout_ms=0)
    _wait_operational(client, group_id)
    return statements


def _wait_operational(client: GraphClient, group_id: str) -> None:
    deadline = time.monotonic() + _OPERATIONAL_WAIT_SECONDS
    while time.monotonic() < deadline:
        pending = [i for i in relationship_indexes(client, group_id) if i.status != "OPERATIONAL"]
        if not pending:
            return
        time.sleep(0.05)
