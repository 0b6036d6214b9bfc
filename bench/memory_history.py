"""Memory as of a moment: the cost of a user's correction time line (`load_timeline` and each
corrected fact's state then) with many corrections whose snapshots hold 1,536-dimension
embeddings, the old way beside the new, in one run.

Run: `.venv/bin/python bench/memory_history.py [--rows 5000] [--postgres]`.

Seeds `--rows` `memory_corrections` rows for one user (each retracts one fact: its `before`
and `after` snapshots carry the embedding, about 30 KB of JSON each) into a temporary SQLite
file, or with `--postgres` into a temporary database on 127.0.0.1:5432 (dropped at the end).
Then times, at a moment before every correction (all of them "after the moment": the worst
case) and at one halfway:
- old: every row read whole (embeddings too, the newest MAX_CORRECTIONS), and each corrected
  fact's later corrections found by rescanning the corrections after the moment;
- new: only the rows after the moment, the embeddings dropped by the database, one count of
  the older ones, and the time line indexed by fact.
Median of 3 after one warm-up; ratios old/new. Asserts nothing (speed is not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

import sqlalchemy as sa  # noqa: E402

from yuxi_dash.memory.history.timeline import (  # noqa: E402
    MAX_CORRECTIONS,
    Correction,
    Timeline,
    load_timeline,
    when,
)
from yuxi_dash.settings import Settings  # noqa: E402
from yuxi_dash.store.db import create_engine_for_url, forget_engines, session_scope, upgrade  # noqa: E402
from yuxi_dash.store.models import AuditEntry, MemoryCorrection  # noqa: E402

USER = "bench_user"
DIMENSIONS = 1536
START = datetime(2026, 3, 1, tzinfo=UTC)
ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/test"


def _snapshot(n: int, expired: datetime | None) -> dict[str, Any]:
    stamp = expired.isoformat() if expired else None
    return {
        "uuid": f"fact-{n}",
        "source_node_uuid": f"n{n % 97}",
        "target_node_uuid": f"n{n % 89}",
        "name": "LIVES_IN",
        "fact": f"user fact {n}",
        "group_id": "user_bench_user",
        "episodes": [f"ep-{n}"],
        "created_at": (START - timedelta(days=1)).isoformat(),
        "expired_at": stamp,
        "valid_at": (START - timedelta(days=1)).isoformat(),
        "invalid_at": stamp,
        "reference_time": None,
        "attributes": {"status": "retracted" if expired else "active"},
        "fact_embedding": [((n * 31 + i) % 1000) / 1000.0 for i in range(DIMENSIONS)],
    }


def seed(url: str, rows: int) -> float:
    engine = create_engine_for_url(url)
    started = time.perf_counter()
    try:
        for first in range(0, rows, 250):
            batch = range(first, min(rows, first + 250))
            with engine.begin() as conn:
                ids = conn.execute(
                    sa.insert(AuditEntry).returning(AuditEntry.id),
                    [
                        {"actor": "bench", "action": "memory.retract", "target": f"memory:{USER}",
                         "outcome": "ok", "detail": {}, "at": START}
                        for _ in batch
                    ],
                ).scalars().all()  # fmt: skip
                conn.execute(
                    sa.insert(MemoryCorrection),
                    [
                        {
                            "id": str(uuid.uuid4()), "audit_id": audit_id,
                            "at": START + timedelta(minutes=n), "actor": "bench",
                            "user_id": USER, "group_id": "user_bench_user",
                            "fact_uuid": f"fact-{n}", "action": "retract", "reason": "bench",
                            "ticket": None, "hits_before": 0,
                            "before": {f"fact-{n}": _snapshot(n, None)},
                            "after": {f"fact-{n}": _snapshot(n, START + timedelta(minutes=n))},
                        }
                        for n, audit_id in zip(batch, ids, strict=True)
                    ],
                )  # fmt: skip
    finally:
        engine.dispose()
    return time.perf_counter() - started


# --- the old way, kept here for the comparison ------------------------------------------
def old_timeline(settings: Settings) -> Timeline:
    """Every row whole (embeddings too), the newest MAX_CORRECTIONS, oldest first."""
    with session_scope(settings) as session:
        rows = list(
            session.scalars(
                sa.select(MemoryCorrection)
                .where(MemoryCorrection.user_id == USER)
                .order_by(MemoryCorrection.at.desc(), MemoryCorrection.audit_id.desc())
                .limit(MAX_CORRECTIONS)
            )
        )
        rows.reverse()
        found = tuple(
            Correction(
                id=r.id, audit_id=int(r.audit_id), at=when(r.at) or START, actor=r.actor,
                action=r.action, reason=r.reason or "", ticket=r.ticket, fact_uuid=r.fact_uuid,
                before=dict(r.before or {}), after=dict(r.after or {}),
            )
            for r in rows
        )  # fmt: skip
    return Timeline(found)


def old_states(timeline: Timeline, moment: datetime) -> int:
    """Each corrected fact's later corrections, the corrections after the moment rescanned."""
    later = 0
    for uuid_ in timeline.overrides(moment):
        after = [c for c in timeline.corrections if c.at > moment]
        later += len([c.shown() for c in after if c.touches(uuid_)])
    return later


def new_states(timeline: Timeline, moment: datetime) -> int:
    return sum(len(timeline.touching(u, moment)) for u in timeline.overrides(moment))


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    call()
    samples, result = [], None
    for _ in range(3):
        began = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples), result


def bench(url: str, rows: int) -> None:
    settings = Settings(database_url=url)
    print(f"seeded {rows:,} corrections in {seed(url, rows):.1f} s ({url.split(':')[0]})")
    print(f"{'moment':34} {'way':5} {'ms':>10} {'rows read':>10} {'later':>8} {'old/new':>8}")
    for label, moment in (
        ("before every correction", START - timedelta(minutes=1)),
        ("halfway", START + timedelta(minutes=rows // 2)),
    ):

        def old(at: datetime = moment) -> tuple[int, int]:
            timeline = old_timeline(settings)
            return len(timeline.corrections), old_states(timeline, at)

        def new(at: datetime = moment) -> tuple[int, int]:
            timeline = load_timeline(settings, USER, since=at)
            return len(timeline.corrections), new_states(timeline, at)

        old_ms, (old_rows, old_later) = timed(old)
        new_ms, (new_rows, new_later) = timed(new)
        assert old_later == new_later, "the two ways disagree"
        print(f"{label:34} {'old':5} {old_ms:10.1f} {old_rows:10,} {old_later:8,}")
        print(f"{'':34} {'new':5} {new_ms:10.1f} {new_rows:10,} {new_later:8,} "
              f"{old_ms / new_ms:7.1f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--postgres", action="store_true", help="a temporary PostgreSQL database")
    args = parser.parse_args()
    if not args.postgres:
        with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            upgrade(url)
            bench(url, args.rows)
            forget_engines()
        return
    name = f"yuxi_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.engine.make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        bench(url, args.rows)
    finally:
        forget_engines()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
