"""Bounded label values: the one place that decides which agents get a label of their own.

Agent slugs come from outside (an attached platform's ``assistant_id`` or
``graph_id``), so there can be as many as it has assistants. A label that names
an agent (`/metrics`' ``yuxi_dash_threads``, Alertmanager's ``agent``) names
only the top ``YUXI_DASH_LABEL_AGENTS_MAX`` agents by thread count (threads not
deleted; ties by slug), and `OTHER_AGENT` for every other one: at most N + 1
values. `top_agents` is the query; `agent_label` and `agent_label_column` apply
it in Python and in SQL.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.orm import QueryableAttribute, Session

from yuxi_dash.store.models import Conversation

OTHER_AGENT = "other"  # the label value of every agent outside the top N


def top_agents(session: Session, limit: int) -> frozenset[str]:
    """The ``limit`` agents with the most threads (not deleted); ties broken by slug."""
    count = sa.func.count()
    query = (
        sa.select(Conversation.agent_slug)
        .where(Conversation.status != "deleted")
        .group_by(Conversation.agent_slug)
        .order_by(count.desc(), Conversation.agent_slug)
        .limit(max(1, int(limit)))
    )
    return frozenset(session.scalars(query))


def agent_label(agent: str, top: Collection[str]) -> str:
    """The label value of ``agent``: itself when among ``top``, else `OTHER_AGENT`."""
    return agent if agent in top else OTHER_AGENT


def agent_label_column(
    top: Collection[str], column: QueryableAttribute[str] | None = None
) -> sa.ColumnElement[str]:
    """`agent_label` of an agent slug column (`Conversation.agent_slug` unless given), in SQL
    (to GROUP BY)."""
    if not top:
        return sa.literal(OTHER_AGENT, sa.String)
    slug = Conversation.agent_slug if column is None else column
    return sa.case(
        (slug.in_(sorted(top)), slug),
        else_=sa.literal(OTHER_AGENT, sa.String),
    )
