"""The stand-in platform's HTTP side: `POST /api/chat/thread/{thread_id}/compress` over uvicorn.

`python -m tests.attach.platform_server SPEC.json` serves a FastAPI app on
the spec's port. For the platform database it serves (below) it opens a
PostgresSaver pool and builds the same `create_agent` graph as
`tests.attach.platform` (scripted model, `query_kb`, our compression
middleware). A compress, as the real platform does it:

- a bearer-token check (401 without the spec's token);
- 404 when the thread has no checkpoint; 422 when its agent (checkpoint
  metadata ``assistant_id``) is in ``unsupported_agents``;
- its own per-thread lock, taken without waiting (a second compress of the
  same thread is 409), and an idle check under it: 409 ``thread_busy`` while
  the thread is marked as running, or its newest checkpoint has a next step;
- ``expected_checkpoint_id`` other than the newest: 409 ``stale_state``;
- the summary with our engine and the offline extractive summarizer, written
  through the agent graph's ``update_state`` (as its "model" node), with the
  compression's ``token_usage``; then 200 with the result fields.

Errors are ``{"detail": {"code", "message"}}``. The answer carries
``Server-Timing: app;dur=<ms>``: the handling time, deliberate delays left out.
One process serves one platform database at a time: the spec's ``conninfo``
and ``workdir``, or whatever ``POST /_use`` names (the tests' fixture points it
at a fresh database per test; ``{}`` lets the last one go). Each database has
its own pool, graph and controls, so ``/_use`` starts with none set.
``POST /_run`` runs the platform's agent over threads, one run at a time
(`tests.attach.platform.run_threads`), so the platform writes its own
checkpoints in its own process.
Test controls: ``POST /_control`` (``busy``, ``unsupported_agents``,
``delay_before``/``delay_after`` seconds, ``status_override`` with an optional
``body`` and ``retry_after``), ``GET /_record`` (every call received with its
headers' ids, the most calls ever in flight, the summaries written).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from langchain.agents import create_agent
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from tests.attach.platform import CONTEXT_WINDOW, KEEP_MESSAGES, SUMMARY_THRESHOLD, run_threads
from tests.compression.agents import query_kb_tool, research_script, scripted_model
from yuxi_dash.compression import ExtractiveSummarizer, prepare_summary, write_summary
from yuxi_dash.compression.middleware import context_compression_middleware
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY, context_state, state_update
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.service.usage_writes import merged_token_usage
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens


class Controls:
    """What the tests set, and what the stand-in saw."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy: set[str] = set()
        self.unsupported_agents: set[str] = set()
        self.delay_before = 0.0
        self.delay_after = 0.0
        self.status_override: int | None = None
        self.override_body: str | None = None
        self.retry_after: str | None = None
        self.calls: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.written: list[dict[str, Any]] = []
        self.thread_locks: dict[str, threading.Lock] = {}

    def thread_lock(self, thread_id: str) -> threading.Lock:
        with self.lock:
            return self.thread_locks.setdefault(thread_id, threading.Lock())


def _error(status: int, code: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"code": code, "message": message})


class PlatformState:
    """One platform: its database (a pool, the saver), its agent graph, its workdir, controls."""

    def __init__(self, conninfo: str, workdir: str) -> None:
        self.pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=8,
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0},
            open=True,
        )
        self.saver = PostgresSaver(self.pool)  # type: ignore[arg-type]
        self.saver.setup()  # the platform owns its tables
        self.workdir = Workdir(Path(workdir))
        self.agent = create_agent(
            scripted_model(research_script(0)),
            [query_kb_tool(lambda q: q)],
            middleware=context_compression_middleware(
                workdir=workdir,
                summary_threshold_k=SUMMARY_THRESHOLD,
                keep_messages=KEEP_MESSAGES,
                context_window=CONTEXT_WINDOW,
            ),
            checkpointer=self.saver,
        )
        self.controls = Controls()

    def close(self) -> None:
        self.pool.close()


def build_app(spec: dict[str, Any]) -> FastAPI:
    token = spec.get("token")
    serving: list[PlatformState] = []  # the platform served now (none until `/_use`)
    if spec.get("conninfo"):
        serving.append(PlatformState(spec["conninfo"], spec["workdir"]))
    switching = threading.Lock()
    running = threading.Lock()  # one run at a time: a skewed clock is the whole process's
    app = FastAPI()

    def current() -> PlatformState:
        with switching:
            if not serving:
                raise _error(503, "no_platform", "no platform database yet: POST /_use first")
            return serving[0]

    @app.post("/_use")
    def use(body: dict[str, Any]) -> dict[str, bool]:
        """Serve another platform database from now on (a fresh one per test); {} serves none."""
        with switching:
            while serving:
                serving.pop().close()
            if body.get("conninfo"):
                serving.append(PlatformState(body["conninfo"], body["workdir"]))
        return {"ok": True}

    @app.post("/_run")
    def run(body: dict[str, Any]) -> Response:
        """Run the platform's agent over ``threads`` (`tests.attach.platform.run_threads`)."""
        state = current()
        try:
            with running:
                result = run_threads(state.saver, Path(state.workdir.root), body)
        except Exception:  # the test's assertion shows the platform's own traceback
            return PlainTextResponse(traceback.format_exc(), 500)
        return JSONResponse(result)

    @app.post("/_control")
    def control(settings: dict[str, Any]) -> dict[str, bool]:
        controls = current().controls
        with controls.lock:
            if "busy" in settings:
                controls.busy = set(settings["busy"])
            if "unsupported_agents" in settings:
                controls.unsupported_agents = set(settings["unsupported_agents"])
            for name in ("delay_before", "delay_after"):
                if name in settings:
                    setattr(controls, name, float(settings[name]))
            if "status_override" in settings:
                controls.status_override = settings["status_override"]
                controls.override_body = settings.get("body")
                controls.retry_after = settings.get("retry_after")
            if settings.get("reset_record"):
                controls.calls.clear()
                controls.written.clear()
                controls.max_in_flight = 0
        return {"ok": True}

    @app.get("/_record")
    def record() -> dict[str, Any]:
        controls = current().controls
        with controls.lock:
            return {
                "calls": list(controls.calls),
                "max_in_flight": controls.max_in_flight,
                "written": list(controls.written),
            }

    @app.post("/api/chat/thread/{thread_id}/compress")
    def compress(thread_id: str, request: Request, body: dict[str, Any] | None = None) -> Response:
        started = time.perf_counter()
        state = current()
        controls = state.controls
        with controls.lock:
            controls.in_flight += 1
            controls.max_in_flight = max(controls.max_in_flight, controls.in_flight)
            controls.calls.append(
                {
                    "thread_id": thread_id,
                    "at": time.time(),
                    "idempotency_key": request.headers.get("Idempotency-Key"),
                    "request_id": request.headers.get("X-Request-Id"),
                    "authorized": request.headers.get("Authorization") == f"Bearer {token}",
                    "expected_checkpoint_id": (body or {}).get("expected_checkpoint_id"),
                }
            )
            override = controls.status_override
        paused = 0.0
        try:
            if override is not None:
                headers = {"Retry-After": controls.retry_after} if controls.retry_after else {}
                if controls.override_body is not None:
                    return PlainTextResponse(controls.override_body, override, headers=headers)
                return JSONResponse(
                    {"detail": {"code": "overridden", "message": f"status {override}"}},
                    override,
                    headers=headers,
                )
            if token and request.headers.get("Authorization") != f"Bearer {token}":
                raise _error(401, "unauthorized", "a valid bearer token is required")
            expected = (body or {}).get("expected_checkpoint_id")
            result, paused = _compress(state, thread_id, expected)
            handled = (time.perf_counter() - started) * 1000 - paused * 1000
            return JSONResponse(result, headers={"Server-Timing": f"app;dur={handled:.3f}"})
        finally:
            with controls.lock:
                controls.in_flight -= 1

    def _compress(
        state: PlatformState, thread_id: str, expected: str | None
    ) -> tuple[dict[str, Any], float]:
        agent, controls = state.agent, state.controls
        config: Any = {"configurable": {"thread_id": thread_id}}
        snapshot = agent.get_state(config)
        if not snapshot.config.get("configurable", {}).get("checkpoint_id"):
            raise _error(404, "thread_not_found", f"no thread {thread_id}")
        agent_slug = (snapshot.metadata or {}).get("assistant_id")
        if agent_slug in controls.unsupported_agents:
            raise _error(422, "compression_unsupported", "the agent lacks context_compression")
        lock = controls.thread_lock(thread_id)
        if not lock.acquire(blocking=False):
            raise _error(409, "thread_busy", "a compress of this thread is running")
        paused = 0.0
        try:
            snapshot = agent.get_state(config)  # the idle check, under the lock
            if thread_id in controls.busy or snapshot.next:
                raise _error(409, "thread_busy", "the thread has an active run")
            current = snapshot.config["configurable"]["checkpoint_id"]
            if expected is not None and expected != current:
                raise _error(409, "stale_state", "the thread moved on")
            if controls.delay_before:
                time.sleep(controls.delay_before)
                paused += controls.delay_before
            result = _summarize(state, thread_id, snapshot.values, config)
            if controls.delay_after:  # written, then slow to answer
                time.sleep(controls.delay_after)
                paused += controls.delay_after
            return result, paused
        finally:
            lock.release()

    def _summarize(
        state: PlatformState, thread_id: str, values: dict[str, Any], config: Any
    ) -> dict[str, Any]:
        workdir = state.workdir
        before = context_state(thread_id, values)
        prepared = prepare_summary(
            before, workdir=workdir, summarizer=ExtractiveSummarizer(), keep_messages=KEEP_MESSAGES
        )
        outcome = write_summary(prepared, workdir=workdir)
        result = {
            "thread_id": thread_id,
            "status": outcome.status,
            "before_tokens": outcome.before_tokens,
            "after_tokens": outcome.after_tokens,
            "compressed_messages": outcome.compressed_messages,
            "file_path": outcome.file_path,
            "reason": outcome.reason,
        }
        if prepared.cutoff is None:
            return result
        now = datetime.now(UTC).isoformat()
        figures = UsageSnapshot(
            llm_input_tokens=outcome.after_tokens,
            next_llm_input_tokens=outcome.after_tokens,
            context_window=CONTEXT_WINDOW,
            summary_trigger_tokens=summary_trigger_tokens(SUMMARY_THRESHOLD),
            summary_active=outcome.state.summary_active(),
        )
        previous = values.get(TOKEN_USAGE_KEY) or {}
        update = state_update(before, outcome.state)
        update[TOKEN_USAGE_KEY] = {
            **merged_token_usage(
                previous,
                compression={"source": "manual_compression", "at": now, **result},
                figures=figures,
            ),
            "source": "manual_compression",
            "measured_at": now,
        }
        written = state.agent.update_state(config, update, as_node="model")
        result["checkpoint_id"] = written["configurable"]["checkpoint_id"]
        with state.controls.lock:
            state.controls.written.append({"thread_id": thread_id, **result})
        return result

    return app


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    uvicorn.run(
        build_app(spec), host="127.0.0.1", port=int(spec["port"]), log_level="warning", workers=1
    )


if __name__ == "__main__":
    main(sys.argv[1])
