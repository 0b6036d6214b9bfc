"""Benchmark: the three Operations pages in Streamlit AppTest on 100,000 threads in PostgreSQL.

Issue 12 item 5: with 100,000 threads and 1,000,000 usage snapshots in
PostgreSQL, an AppTest run of the pressure overview, the threads >= 85% list
and a thread detail each completes in <= 1.5 s.

The database (default `yuxi_bench_fleet`) is built once and reused on reruns
(`--rebuild` to start again): the schema by our migrations, threads and
snapshots by COPY (`bench.threads.load`, the rows the projection writes: each
conversation's current usage is its last snapshot), and for the threads the
bench opens (`--detail-threads`) real checkpoints written through
`store.checkpointer` and projected by `service.projection.project_thread`, as
the service does after a model call. Their bulk snapshots are replaced by the
projection's, so the totals stay exact.

Each page runs in AppTest (app.py, switched to the page) with the loaders'
cache cleared before every run, so every run reads the database: one cold
run (the first in this process), `--runs` runs each in a new AppTest (each
pays Streamlit's once-per-AppTest scan of every installed package's metadata
for components, which a served app does once at start), and `--runs` reruns
of one AppTest after a warm-up: the figure held against the 1.5 s target.
Wall and CPU (this process, every thread) time are printed: the machine is
shared, and CPU time is what our code costs when it is not waiting for a
core. Also printed: the SQL of one rerun, its heaviest statements, and their
EXPLAIN ANALYZE when a page is over the target (or `--explain`).

    .venv/bin/python bench/pages.py [--rebuild] [--runs 5] [--database yuxi_bench_fleet]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

import yuxi_dash  # noqa: E402
from bench.threads import load  # noqa: E402
from yuxi_dash.compression.engine import count_state_tokens  # noqa: E402
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY, context_state  # noqa: E402
from yuxi_dash.files.workdir import Workdir  # noqa: E402
from yuxi_dash.service.projection import project_thread  # noqa: E402
from yuxi_dash.settings import Settings, get_settings  # noqa: E402
from yuxi_dash.store import db  # noqa: E402
from yuxi_dash.store.checkpointer import checkpoint_store  # noqa: E402
from yuxi_dash.store.models import Agent, ChatMessage, Conversation, UsageSnapshotRow  # noqa: E402
from yuxi_dash.ui.loaders import clear_loaders  # noqa: E402
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens  # noqa: E402

ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/test"
APP = ROOT / "app.py"
TARGET_S = 1.5
PAGES = {
    "pressure overview": "app_pages/overview.py",
    "threads >= 85%": "app_pages/threads.py",
    "thread detail": "app_pages/thread_detail.py",
}
TURNS = 10  # checkpoints (model calls) per opened thread: its 10 snapshots
TOOL_CHARS = 7000  # per turn: brings a faq thread (20 K threshold) to ~90% pressure


# --- the database --------------------------------------------------------------


def database_url(admin_url: str, name: str) -> str:
    return sa.engine.make_url(admin_url).set(database=name).render_as_string(False)


def _admin(admin_url: str) -> sa.Engine:
    return sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")


def _exists(admin_url: str, name: str) -> bool:
    engine = _admin(admin_url)
    with engine.connect() as conn:
        found = conn.scalar(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
    engine.dispose()
    return bool(found)


def _recreate(admin_url: str, name: str) -> None:
    engine = _admin(admin_url)
    with engine.connect() as conn:
        conn.execute(
            sa.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :n AND pid <> pg_backend_pid()"
            ),
            {"n": name},
        )
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()


def detail_thread_ids(count: int) -> list[str]:
    return [f"thread-{i:06d}" for i in range(count)]


def _complete(url: str, threads: int, per_thread: int, detail: list[str]) -> bool:
    """True when the database holds what this run asks for (then it is reused)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            n_conv = conn.scalar(sa.text("SELECT count(*) FROM conversations"))
            n_snap = conn.scalar(sa.text("SELECT count(*) FROM usage_snapshots"))
            with_checkpoint = conn.scalar(
                sa.select(sa.func.count())
                .select_from(Conversation)
                .where(Conversation.thread_id.in_(detail), Conversation.checkpoint_id.is_not(None))
            )
    except sa.exc.SQLAlchemyError:
        return False
    finally:
        engine.dispose()
    return n_conv == threads and n_snap == threads * per_thread and with_checkpoint == len(detail)


def _turn(thread_id: str, i: int) -> list[BaseMessage]:
    call = f"{thread_id}-c{i}"
    return [
        HumanMessage(f"Question {i}: check the deployment logs of service {i}.", id=f"{call}-h"),
        AIMessage(
            "",
            tool_calls=[{"name": "run_command", "args": {"cmd": f"logs {i}"}, "id": call}],
            id=f"{call}-a",
        ),
        ToolMessage(
            f"log line {i}: request served in 12 ms\n" * (TOOL_CHARS // 36),
            tool_call_id=call,
            name="run_command",
            id=f"{call}-t",
        ),
        AIMessage(f"Answer {i}: the deployment finished without errors.", id=f"{call}-r"),
    ]


def write_detail_threads(settings: Settings, thread_ids: list[str]) -> None:
    """Replace these threads' bulk rows with real checkpoints and their projection.

    Each thread becomes a `faq` thread with TURNS model calls; each call is one
    checkpoint stating its token usage (as the token-usage middleware writes it),
    projected into snapshots, chat record and current usage by the service's
    own projection.
    """
    store = checkpoint_store(settings.database_url)
    start = datetime.now(UTC) - timedelta(hours=2)
    for thread_id in thread_ids:
        store.saver.delete_thread(thread_id)
        with db.session_scope(settings) as session:
            agent = session.scalar(sa.select(Agent).where(Agent.slug == "faq"))
            assert agent is not None, "bench.threads.load creates the faq agent"
            session.execute(
                sa.delete(UsageSnapshotRow).where(UsageSnapshotRow.thread_id == thread_id)
            )
            session.execute(sa.delete(ChatMessage).where(ChatMessage.thread_id == thread_id))
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            )
            assert conv is not None, thread_id
            conv.agent_slug, conv.status, conv.checkpoint_id = "faq", "active", None
            messages: list[BaseMessage] = []
            expected: str | None = None
            for i in range(TURNS):
                turn = _turn(thread_id, i)
                messages.extend(turn)
                tokens = count_state_tokens(context_state(thread_id, {"messages": messages}))
                usage = UsageSnapshot(
                    llm_input_tokens=max(0, tokens - 400),
                    next_llm_input_tokens=tokens,
                    context_window=agent.context_window,
                    summary_trigger_tokens=summary_trigger_tokens(agent.summary_threshold),
                    summary_active=False,
                )
                at = start + timedelta(minutes=5 * i)
                written = store.write(
                    thread_id,
                    {
                        "messages": turn,
                        TOKEN_USAGE_KEY: {**usage.to_dict(), "measured_at": at.isoformat()},
                    },
                    expected_checkpoint_id=expected,
                )
                expected = written.checkpoint_id
            project_thread(session, conv, store)


def ensure_database(
    admin_url: str, name: str, threads: int, per_thread: int, detail: list[str], rebuild: bool
) -> str:
    url = database_url(admin_url, name)
    if not rebuild and _exists(admin_url, name) and _complete(url, threads, per_thread, detail):
        print(f"reusing {name}: {threads:,} threads, {threads * per_thread:,} snapshots")
        return url
    start = time.perf_counter()
    _recreate(admin_url, name)
    db.upgrade(url)
    load(url, threads, per_thread)  # COPY + VACUUM ANALYZE
    write_detail_threads(Settings(database_url=url), detail)
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    engine.dispose()
    if not _complete(url, threads, per_thread, detail):
        raise SystemExit("the bench database is not what was asked for after building it")
    print(
        f"built {name}: {threads:,} threads, {threads * per_thread:,} snapshots, "
        f"{len(detail)} threads with real checkpoints, in {time.perf_counter() - start:.1f} s"
    )
    return url


# --- statement timing --------------------------------------------------------------


class StatementLog:
    """Time of every SQL statement on our engines while `capturing` is on."""

    def __init__(self) -> None:
        self.capturing = False
        self.times: dict[str, list[float]] = defaultdict(list)
        self.params: dict[str, Any] = {}
        self._started: dict[int, float] = {}

    def attach(self, engine: sa.Engine) -> None:
        sa.event.listen(engine, "before_cursor_execute", self._before)
        sa.event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self._started[id(cursor)] = time.perf_counter()

    def _after(self, conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        started = self._started.pop(id(cursor), None)
        if self.capturing and started is not None:
            self.times[statement].append(time.perf_counter() - started)
            self.params[statement] = parameters

    @contextmanager
    def capture(self) -> Iterator[None]:
        self.times.clear()
        self.params.clear()
        self.capturing = True
        try:
            yield
        finally:
            self.capturing = False

    def top(self, n: int = 3) -> list[tuple[float, int, str]]:
        rows = [(sum(t), len(t), sql) for sql, t in self.times.items()]
        return sorted(rows, reverse=True)[:n]


# --- the pages ------------------------------------------------------------------------


class PageRun:
    """app.py in one AppTest, switched to `page` (with `query` as its query string)."""

    def __init__(self, page: str, query: dict[str, str]) -> None:
        self.page, self.query = page, query
        self.at = AppTest.from_file(str(APP), default_timeout=300)
        for key, value in query.items():
            self.at.query_params[key] = value
        self.at.switch_page(page)

    def run(self) -> tuple[float, float]:
        """(wall s, CPU s of this process) of one run, the loaders' cache cleared first."""
        clear_loaders()
        wall, cpu = time.perf_counter(), time.process_time()
        self.at.run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        at, page = self.at, self.page
        if at.exception:
            raise SystemExit(f"{page} raised: {at.exception[0].value}")
        if at.error:
            raise SystemExit(f"{page} drew an error: {at.error[0].value}")
        drawn = len(at.dataframe) if page.endswith("threads.py") else len(at.metric)
        wanted = self.query.get("thread")
        if not drawn or (wanted and at.selectbox(key="detail_thread").value != wanted):
            raise SystemExit(f"{page} did not draw its data")
        return wall, cpu


def _isolate(url: str, root: Path) -> None:
    """Settings for this process only: the bench database, a fresh workdir, no `.env`."""
    for name in list(os.environ):
        if name.startswith("YUXI_DASH_"):
            del os.environ[name]
    os.chdir(root)
    os.environ["YUXI_DASH_DATABASE_URL"] = url
    os.environ["YUXI_DASH_WORKDIR"] = str(root / "workdir")
    os.environ["YUXI_DASH_FALKORDB_DIR"] = str(root / "falkordb")
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    Workdir(root / "workdir").initialize()
    get_settings.cache_clear()


def _median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def measure(url: str, runs: int, detail: str, explain: bool) -> dict[str, float]:
    """Per page: cold, then `runs` fresh AppTests and `runs` reruns of one (loaders cleared)."""
    settings = get_settings()
    log = StatementLog()
    log.attach(db.get_engine(settings))
    medians: dict[str, float] = {}
    for label, page in PAGES.items():
        query = {"thread": detail} if page.endswith("thread_detail.py") else {}
        cold, _ = PageRun(page, query).run()
        fresh = _median([PageRun(page, query).run() for _ in range(runs)])
        rerun = PageRun(page, query)
        rerun.run()  # warm-up: Streamlit's one-time set-up of this AppTest
        again = [rerun.run() for _ in range(runs)]
        with log.capture():
            rerun.run()
        wall, cpu = _median(again)
        medians[label] = wall
        verdict = "ok" if wall <= TARGET_S else "OVER"
        print(
            f"{label:18s} cold {cold:6.3f} s | new AppTest each run: median {fresh[0]:6.3f} s "
            f"(cpu {fresh[1]:.3f}) | rerun: median {wall:6.3f} s (cpu {cpu:.3f}, "
            f"min {min(w for w, _ in again):.3f}, max {max(w for w, _ in again):.3f}) "
            f"| target {TARGET_S} s: {verdict}"
        )
        sql_total = sum(sum(t) for t in log.times.values())
        calls = sum(len(t) for t in log.times.values())
        print(f"    SQL in one rerun: {calls} statements, {sql_total * 1000:.1f} ms; heaviest:")
        for total, n, sql in log.top(3):
            print(f"    {total * 1000:8.1f} ms  x{n:<3d} {' '.join(sql.split())[:140]}")
        if explain or wall > TARGET_S:
            explain_heaviest(url, log)
    return medians


def explain_heaviest(url: str, log: StatementLog) -> None:
    """EXPLAIN ANALYZE of the heaviest SELECT of the captured run, with its own parameters."""
    for _total, _calls, sql in log.top(5):
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            plan = conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}", log.params.get(sql) or {}
            )
            print("    EXPLAIN ANALYZE:")
            for (line,) in plan:
                print(f"      {line}")
        engine.dispose()
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--database", default="yuxi_bench_fleet")
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--snapshots-per-thread", type=int, default=10)
    parser.add_argument("--detail-threads", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true", help="drop and build the database")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN even when under target")
    args = parser.parse_args()

    detail = detail_thread_ids(args.detail_threads)
    url = ensure_database(
        args.admin_url,
        args.database,
        args.threads,
        args.snapshots_per_thread,
        detail,
        args.rebuild,
    )
    print(f"code under test: {Path(yuxi_dash.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        _isolate(url, Path(tmp))
        try:
            medians = measure(url, args.runs, detail[0], args.explain)
        finally:
            db.forget_engines()
    over = [label for label, m in medians.items() if m > TARGET_S]
    print("all pages within target" if not over else f"over target: {', '.join(over)}")


if __name__ == "__main__":
    main()
