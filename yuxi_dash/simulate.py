"""The agent simulator behind `yuxi-dash simulate` and the demo's live threads.

Owns a deterministic fake chat model (seeded `random.Random`, no network) that
calls realistic tools, the generators of those tools' outputs (`query_kb`
document records, `web_search` hits, `run_command` logs, `write_file` with a
large `content` argument), and the driver that plays agent turns against the
store: every turn goes through the run lifecycle (queued -> running ->
completed), every model call records a usage snapshot (source `model_call`),
and the engine's `auto_compact` fires at the agent's threshold (source
`auto_compaction`), so usage timelines show real sawtooths. The user's and
assistant's words go to the never-compressed chat record.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from yuxi_dash.compression import (
    Summarizer,
    ThreadContextState,
    auto_compact,
    count_state_tokens,
    get_summarizer,
    is_summary_message,
    message_text,
    model_view,
)
from yuxi_dash.errors import AgentNotFound, InvalidInput, ThreadBusy, ThreadNotFound
from yuxi_dash.records import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.models import CONTEXT_COMPRESSION
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens, usage_snapshot
from yuxi_dash.workdir import SavedFile, Workdir

# ---------------------------------------------------------------------------
# Topics: what simulated users ask about, and the material tools return.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Topic:
    """One line of work a simulated user pursues with the agent."""

    key: str
    title: str
    asks: tuple[str, ...]
    kb_id: str
    kb_queries: tuple[str, ...]
    web_queries: tuple[str, ...]
    commands: tuple[str, ...]
    files: tuple[str, ...]
    sentences: tuple[str, ...]


TOPICS: tuple[Topic, ...] = (
    Topic(
        key="refunds",
        title="Refund policy for annual plans",
        asks=(
            "Find our refund policy for annual plans and cite the source.",
            "Does the pro-rata rule also apply to plans bought through resellers?",
            "Draft a reply to a customer who asks for a refund after 45 days.",
            "Compare our refund terms with what competitors publish.",
            "Summarise the exceptions the policy allows for enterprise contracts.",
        ),
        kb_id="kb_support",
        kb_queries=(
            "refund policy annual plan",
            "reseller refunds",
            "refund exceptions enterprise",
        ),
        web_queries=("saas annual plan refund policy", "pro rata refund consumer law EU"),
        commands=("grep -rn refund policies/", "python scripts/refund_stats.py --since 2026-01-01"),
        files=("drafts/refund_reply.md", "reports/refund_comparison.md"),
        sentences=(
            "Annual plans can be refunded pro rata within 30 days of purchase.",
            "Refunds after the 30-day window need written approval from the billing lead.",
            "Plans bought through a reseller are refunded by the reseller, not by us.",
            "Enterprise contracts follow the refund terms negotiated in the order form.",
            "Chargebacks are handled by the payments team and close the account automatically.",
            "Monthly plans are not refunded; cancellation takes effect at the end of the period.",
            "Customers in the EU may withdraw within 14 days under the consumer rights directive.",
        ),
    ),
    Topic(
        key="latency",
        title="API latency regression",
        asks=(
            "p95 latency on /v2/search doubled since Tuesday. Find out why.",
            "Run the load test again with the connection pool at 40.",
            "Write up the incident timeline for the postmortem.",
            "Check whether the index on documents.updated_at is being used.",
            "What changed in the deploy on Tuesday afternoon?",
        ),
        kb_id="kb_runbooks",
        kb_queries=(
            "search latency runbook",
            "connection pool sizing",
            "postgres slow query triage",
        ),
        web_queries=("postgres index not used after analyze", "uvicorn worker latency p95"),
        commands=(
            "pytest -q tests/perf",
            "k6 run load/search.js",
            "kubectl logs deploy/search-api",
        ),
        files=("postmortems/2026-11-search-latency.md", "load/search.js"),
        sentences=(
            "The search endpoint fans out to the vector store and the keyword index in parallel.",
            "Connection pool exhaustion shows up as a plateau in p50 and a cliff in p95.",
            "An ANALYZE after the bulk import changed the planner's choice to a sequential scan.",
            "The Tuesday deploy raised the default page size from 20 to 100 results.",
            "Rolling back the page size brought p95 from 840 ms to 310 ms in staging.",
            "Workers were recycled every 500 requests, which cold-starts the embedding cache.",
            "The runbook says to check pg_stat_statements before touching the pool size.",
        ),
    ),
    Topic(
        key="onboarding",
        title="Onboarding checklist for new hires",
        asks=(
            "Put together the onboarding checklist for a backend engineer starting Monday.",
            "Which accounts need manager approval before day one?",
            "Add the security training deadlines to the checklist.",
            "Turn the checklist into a welcome email.",
        ),
        kb_id="kb_hr",
        kb_queries=(
            "onboarding checklist engineering",
            "account approval policy",
            "security training",
        ),
        web_queries=("engineering onboarding best practices", "first week plan software engineer"),
        commands=("python scripts/provision_accounts.py --dry-run", "ls -la templates/onboarding"),
        files=("onboarding/backend_checklist.md", "onboarding/welcome_email.md"),
        sentences=(
            "Laptops are ordered by IT ten working days before the start date.",
            "Production access needs manager approval and a completed security course.",
            "New engineers pair with a buddy for their first two weeks.",
            "Security awareness training is due within 30 days of the start date.",
            "The first-week plan includes a walkthrough of the deploy pipeline.",
            "Payroll forms must be returned before the end of the first month.",
        ),
    ),
    Topic(
        key="pricing",
        title="Pricing page experiment",
        asks=(
            "Analyse the results of the pricing page A/B test.",
            "Is the uplift in the annual toggle statistically significant?",
            "Write the summary for the growth review.",
            "Which segments reacted differently to the new layout?",
        ),
        kb_id="kb_growth",
        kb_queries=(
            "pricing experiment design doc",
            "annual toggle metrics",
            "segment definitions",
        ),
        web_queries=("ab test sequential testing peeking", "pricing page conversion benchmarks"),
        commands=(
            "python analysis/ab_test.py --experiment pricing-v3",
            "duckdb -c 'select * from events'",
        ),
        files=("analysis/pricing_v3_summary.md", "analysis/segments.csv"),
        sentences=(
            "Variant B moved the annual toggle above the fold and pre-selected it.",
            "Conversion to paid rose from 3.1% to 3.4% with a 95% interval of 0.1 to 0.5 points.",
            "The uplift came almost entirely from self-serve teams of two to ten seats.",
            "Enterprise visitors were excluded because they talk to sales.",
            "The test ran for 21 days to cover three full weekly cycles.",
            "Refund requests did not rise in the variant within the observation window.",
        ),
    ),
    Topic(
        key="migration",
        title="Database migration plan",
        asks=(
            "Plan the migration of the orders table to the partitioned schema.",
            "How long will the backfill take at the current write rate?",
            "Write the runbook for the cut-over night.",
            "What is the rollback plan if replication lag spikes?",
            "Check the migration script for locking problems.",
        ),
        kb_id="kb_platform",
        kb_queries=(
            "orders partitioning design",
            "backfill throttling",
            "cutover runbook template",
        ),
        web_queries=(
            "postgres declarative partitioning migration",
            "online schema change lock timeout",
        ),
        commands=(
            "alembic upgrade head --sql",
            "python tools/backfill.py --estimate",
            "psql -c '\\d+ orders'",
        ),
        files=("runbooks/orders_cutover.md", "migrations/0042_partition_orders.py"),
        sentences=(
            "Orders are partitioned by month on created_at with a default partition for stragglers.",
            "The backfill copies 50,000 rows per batch and sleeps when replication lag exceeds 5 s.",
            "Every DDL statement runs with lock_timeout set to 3 seconds and is retried.",
            "The cut-over swaps the view to the partitioned table inside one short transaction.",
            "Rollback keeps the old table in sync through a trigger for seven days.",
            "Foreign keys to orders are recreated as NOT VALID and validated afterwards.",
        ),
    ),
    Topic(
        key="security",
        title="Dependency vulnerability triage",
        asks=(
            "Triage the new critical advisories in our dependency scan.",
            "Which services actually call the vulnerable function?",
            "Open the upgrade plan for the affected services.",
            "Write the note for the security channel.",
        ),
        kb_id="kb_security",
        kb_queries=(
            "vulnerability triage process",
            "dependency upgrade policy",
            "service ownership map",
        ),
        web_queries=(
            "CVE advisory deserialization library",
            "exploitability reachable function analysis",
        ),
        commands=(
            "pip-audit -r requirements.txt",
            "npm audit --json",
            "rg -n 'yaml.load\\(' services/",
        ),
        files=("security/triage_2026-11.md", "security/upgrade_plan.md"),
        sentences=(
            "Critical advisories must be triaged within one working day.",
            "A vulnerability is reachable only if our code calls the affected entry point.",
            "Three services pin the library transitively through the reporting SDK.",
            "The upgrade is a minor version bump with no breaking changes in the changelog.",
            "Services without an owner are escalated to the platform team.",
            "The scanner flags test-only dependencies, which are out of scope for the SLA.",
        ),
    ),
)

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
    {
        "name": "query_kb",
        "description": "Search a knowledge base and return matching document chunks.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "kb_id": {"type": "string"}},
            "required": ["query", "kb_id"],
        },
    },
    {
        "name": "web_search",
        "description": "Search the web and return pages with their content.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
    {
        "name": "run_command",
        "description": "Run a shell command in the sandbox and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
    {
        "name": "write_file",
        "description": "Write a file in the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
)

SYSTEM_PROMPT = (
    "You are a careful assistant for an operations team. Use the tools to find facts, "
    "cite sources, and write files when asked for documents."
)

_SITES = (
    ("docs.example.org", "Example Docs"),
    ("engineering.example.com", "Example Engineering Blog"),
    ("stackexchange.example.net", "Q&A Exchange"),
    ("news.example.io", "Tech News"),
    ("wiki.example.org", "Open Wiki"),
)
_PREAMBLES = (
    "Let me look that up.",
    "I will check the knowledge base first.",
    "Searching for sources now.",
    "Running that to see the current state.",
    "I'll write this down as a file so you can review it.",
)
_LOG_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARNING", "ERROR")


def stable_rng(*parts: object) -> random.Random:
    """A random generator whose sequence depends only on `parts` (not on PYTHONHASHSEED)."""
    digest = hashlib.sha256(":".join(str(part) for part in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def topic_for(thread_id: str) -> Topic:
    """The topic a thread is about (stable per thread id)."""
    return TOPICS[stable_rng("topic", thread_id).randrange(len(TOPICS))]


# ---------------------------------------------------------------------------
# Tool outputs
# ---------------------------------------------------------------------------


class ToolOutputs:
    """Generates realistic, deterministic tool outputs from a seeded generator."""

    def __init__(self, rng: random.Random, topic: Topic) -> None:
        self.rng = rng
        self.topic = topic

    def prose(self, sentences: int) -> str:
        """`sentences` sentences of topic text."""
        return " ".join(self.rng.choice(self.topic.sentences) for _ in range(sentences))

    def query_kb(self, query: str, kb_id: str, *, top_k: int | None = None) -> str:
        rng = self.rng
        count = top_k or rng.randint(5, 10)
        started = rng.randint(0, 400)
        results = []
        for rank in range(count):
            score = round(max(0.05, 0.95 - rank * 0.05 - rng.random() * 0.04), 4)
            distance = round(1 - score, 4)
            file_no = rng.randint(1, 60)
            filename = f"{self.topic.key}_{file_no:03d}.md"
            title = f"{self.topic.title} - part {file_no}"
            source = f"{kb_id}/{self.topic.key}/{filename}"
            chunk_index = rng.randint(0, 40)
            results.append(
                {
                    "id": f"chunk-{file_no}-{chunk_index}",
                    "kb_id": kb_id,
                    "file_id": f"file-{self.topic.key}-{file_no:03d}",
                    "title": title,
                    "source": source,
                    "score": score,
                    "distance": distance,
                    "content": self.prose(rng.randint(4, 10)),
                    "metadata": {
                        "source": source,
                        "filename": filename,
                        "title": title,
                        "chunk_index": chunk_index,
                        "score": score,
                        "rerank_score": round(score * (0.8 + rng.random() * 0.2), 4),
                        "hybrid_score": round(score * (0.7 + rng.random() * 0.3), 4),
                        "graph_score": round(rng.random() * 0.5, 4),
                        "distance": distance,
                        # noise a real retriever returns and a preview must drop:
                        "internal_host_path": f"/srv/kb/{kb_id}/{started + rank:06x}.bin",
                        "embedding_model": "bge-m3",
                        "ingest_job_id": f"job-{rng.randint(10_000, 99_999)}",
                        "parser": rng.choice(("markdown", "pdfminer", "docx")),
                        "page_range": [chunk_index, chunk_index + 1],
                        "embedding_head": [round(rng.uniform(-1, 1), 6) for _ in range(16)],
                    },
                }
            )
        payload = {
            "query": query,
            "kb_id": kb_id,
            "response_time": round(0.05 + rng.random() * 0.6, 3),
            "results": results,
        }
        return json.dumps(payload, ensure_ascii=False)

    def web_search(self, query: str, *, max_results: int | None = None) -> str:
        rng = self.rng
        count = max_results or rng.randint(4, 8)
        results = []
        for rank in range(count):
            host, site_name = rng.choice(_SITES)
            slug = "-".join(query.lower().split()[:5])
            day = rng.randint(1, 28)
            results.append(
                {
                    "title": f"{query.title()} ({site_name} #{rank + 1})",
                    "url": f"https://{host}/articles/{slug}-{rng.randint(100, 999)}",
                    "site_name": site_name,
                    "publish_time": f"2026-{rng.randint(1, 11):02d}-{day:02d}T08:00:00Z",
                    "score": round(max(0.05, 0.9 - rank * 0.07 - rng.random() * 0.03), 4),
                    "content": self.prose(rng.randint(6, 14)),
                    "raw_content_length": rng.randint(4_000, 60_000),
                    "favicon": f"https://{host}/favicon.ico",
                }
            )
        payload = {
            "query": query,
            "response_time": round(0.3 + rng.random() * 1.5, 3),
            "results": results,
        }
        return json.dumps(payload, ensure_ascii=False)

    def run_command(self, command: str, *, lines: int | None = None) -> str:
        rng = self.rng
        count = lines or rng.randint(40, 160)
        clock = datetime(2026, 11, 1, 9, 0, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 40_000))
        out = [f"$ {command}"]
        for number in range(count):
            clock += timedelta(milliseconds=rng.randint(3, 900))
            level = rng.choice(_LOG_LEVELS)
            module = rng.choice(("runner", "worker", "db", "http", "cache", "scheduler"))
            detail = rng.choice(self.topic.sentences)
            out.append(
                f"{clock:%Y-%m-%d %H:%M:%S.%f} {level:<7} [{module}] step={number} "
                f"elapsed_ms={rng.randint(1, 2500)} {detail}"
            )
        failed = rng.random() < 0.25
        out.append(f"exit status {1 if failed else 0}")
        return "\n".join(out)

    def file_content(self, path: str, *, paragraphs: int | None = None) -> str:
        rng = self.rng
        count = paragraphs or rng.randint(6, 20)
        parts = [f"# {self.topic.title}", "", f"_File: {path}_", ""]
        for number in range(count):
            if number % 4 == 0:
                parts.extend([f"## Section {number // 4 + 1}", ""])
            parts.extend([self.prose(rng.randint(3, 8)), ""])
        return "\n".join(parts)

    def run(self, name: str, args: dict[str, Any]) -> str:
        """The output of tool `name` called with `args`."""
        if name == "query_kb":
            return self.query_kb(str(args.get("query", "")), str(args.get("kb_id", "kb")))
        if name == "web_search":
            return self.web_search(str(args.get("query", "")))
        if name == "run_command":
            return self.run_command(str(args.get("command", "")))
        if name == "write_file":
            content = str(args.get("content", ""))
            return f"Wrote {len(content)} characters to {args.get('path', '')}"
        return f"Unknown tool {name}"


# ---------------------------------------------------------------------------
# The fake model
# ---------------------------------------------------------------------------


class FakeChatModel:
    """A deterministic stand-in for the agent's LLM.

    Within a turn it calls one to four rounds of tools (sometimes two calls in
    one round), then answers in text. The choices come from a seeded generator,
    so the same seed and thread replay the same conversation.
    """

    name = "fake-model"

    def __init__(self, rng: random.Random, topic: Topic, *, max_tool_rounds: int = 4) -> None:
        self.rng = rng
        self.topic = topic
        self.max_tool_rounds = max_tool_rounds
        self._call_counter = 0

    def _new_call_id(self) -> str:
        self._call_counter += 1
        return f"call_{self.rng.getrandbits(40):010x}_{self._call_counter}"

    def _tool_call(self) -> dict[str, Any]:
        rng, topic = self.rng, self.topic
        name = rng.choices(("query_kb", "web_search", "run_command", "write_file"), (4, 3, 3, 2))[0]
        if name == "query_kb":
            args: dict[str, Any] = {"query": rng.choice(topic.kb_queries), "kb_id": topic.kb_id}
        elif name == "web_search":
            args = {"query": rng.choice(topic.web_queries)}
        elif name == "run_command":
            args = {"command": rng.choice(topic.commands)}
        else:
            path = rng.choice(topic.files)
            args = {"path": path, "content": ToolOutputs(rng, topic).file_content(path)}
        return {"name": name, "args": args, "id": self._new_call_id(), "type": "tool_call"}

    def invoke(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next assistant message given what the model sees."""
        rounds_this_turn = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            if isinstance(message, AIMessage) and message.tool_calls:
                rounds_this_turn += 1
        wants_tools = rounds_this_turn == 0 or (
            rounds_this_turn < self.max_tool_rounds and self.rng.random() < 0.55
        )
        if wants_tools:
            calls = [self._tool_call() for _ in range(2 if self.rng.random() < 0.2 else 1)]
            preamble = self.rng.choice(_PREAMBLES) if self.rng.random() < 0.7 else ""
            return AIMessage(content=preamble, tool_calls=calls)
        return AIMessage(content=self.answer())

    def answer(self) -> str:
        rng = self.rng
        points = [f"- {rng.choice(self.topic.sentences)}" for _ in range(rng.randint(2, 5))]
        return "Here is what I found:\n" + "\n".join(points) + "\nTell me if you want more detail."


def user_message(rng: random.Random, topic: Topic, turn: int, remark: str | None = None) -> str:
    """What the simulated user says at `turn` (the first turn opens the topic).

    `remark` (something the user says about themselves, see `yuxi_dash.demo_story`)
    follows the ask; it draws nothing from `rng`, so the rest of the thread is unchanged.
    """
    if turn == 0:
        return f"{topic.asks[0]} {remark}" if remark else topic.asks[0]
    ask = rng.choice(topic.asks[1:])
    if remark:
        ask = f"{ask} {remark}"
    roll = rng.random()
    if roll < 0.18:  # users paste material into the chat sometimes, now and then a lot
        size = rng.randint(150, 300) if roll < 0.06 else rng.randint(20, 60)
        pasted = " ".join(rng.choice(topic.sentences) for _ in range(size))
        return f"{ask}\n\nHere is what I have so far:\n{pasted}"
    return ask


@dataclass
class TurnTrace:
    """The messages one agent turn added, in order (for the chat record)."""

    messages: list[BaseMessage] = field(default_factory=list)


def play_turn(
    messages: list[BaseMessage],
    *,
    model: FakeChatModel,
    tools: ToolOutputs,
    user_text: str,
) -> TurnTrace:
    """Play one turn purely in memory (no compaction): user, tool rounds, answer."""
    trace = TurnTrace()
    human = HumanMessage(content=user_text)
    messages.append(human)
    trace.messages.append(human)
    while True:
        reply = model.invoke(messages)
        messages.append(reply)
        trace.messages.append(reply)
        if not reply.tool_calls:
            return trace
        for call in reply.tool_calls:
            result = ToolMessage(
                content=tools.run(call["name"], call["args"]),
                tool_call_id=call["id"],
                name=call["name"],
            )
            messages.append(result)
            trace.messages.append(result)


# ---------------------------------------------------------------------------
# Agents the simulator (and the demo) run
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentProfile:
    """An agent's compression settings, as the `agents` table holds them."""

    slug: str
    name: str
    capabilities: tuple[str, ...]
    context_window: int
    summary_threshold: int
    summary_keep_messages: int = 10
    summary_tool_result_token_limit: int = 300

    @property
    def trigger_tokens(self) -> int:
        return summary_trigger_tokens(self.summary_threshold)

    @property
    def capable(self) -> bool:
        return CONTEXT_COMPRESSION in self.capabilities

    def agent_fields(self) -> dict[str, Any]:
        """Keyword arguments for `yuxi_dash.service.upsert_agent`."""
        return {
            "name": self.name,
            "capabilities": list(self.capabilities),
            "context_window": self.context_window,
            "summary_threshold": self.summary_threshold,
            "summary_keep_messages": self.summary_keep_messages,
            "summary_tool_result_token_limit": self.summary_tool_result_token_limit,
        }

    @classmethod
    def from_row(cls, row: Any) -> AgentProfile:
        return cls(
            slug=row.slug,
            name=row.name,
            capabilities=tuple(row.capabilities or ()),
            context_window=row.context_window,
            summary_threshold=row.summary_threshold,
            summary_keep_messages=row.summary_keep_messages,
            summary_tool_result_token_limit=row.summary_tool_result_token_limit,
        )


# Small thresholds keep the demo light while still crossing them; agents
# without `context_compression` run no summarization at all, so their threads
# grow past 100% of the threshold.
SIM_AGENTS: tuple[AgentProfile, ...] = (
    AgentProfile(
        slug="research-assistant",
        name="Research assistant",
        capabilities=(CONTEXT_COMPRESSION, "knowledge_base", "web_search", "files"),
        context_window=128_000,
        summary_threshold=24,
    ),
    AgentProfile(
        slug="ops-copilot",
        name="Ops copilot",
        capabilities=(CONTEXT_COMPRESSION, "shell", "knowledge_base", "files"),
        context_window=64_000,
        summary_threshold=16,
    ),
    AgentProfile(
        slug="report-writer",
        name="Report writer (no compression)",
        capabilities=("knowledge_base", "web_search", "files"),
        context_window=24_000,
        summary_threshold=16,
    ),
)
DEFAULT_SIM_AGENT = "ops-copilot"


def sim_agent(slug: str) -> AgentProfile | None:
    return next((agent for agent in SIM_AGENTS if agent.slug == slug), None)


# ---------------------------------------------------------------------------
# The agent loop: model calls, tool results, auto compaction, usage
# ---------------------------------------------------------------------------


@dataclass
class Step:
    """One usage measurement and everything written with it (one `record_model_call`)."""

    source: str  # model_call | auto_compaction
    usage: UsageSnapshot
    state: ThreadContextState
    chat: list[tuple[str, str]]
    saved_files: list[tuple[str | None, str, SavedFile]]
    measured_at: datetime | None
    compression: dict[str, Any] | None = None
    summarized: bool = False
    awaiting_tools: bool = False  # the reply asked for tools (their results are in `state`)

    def token_usage(self, last_compression: dict[str, Any] | None) -> dict[str, Any]:
        usage = {**self.usage.to_dict(), "source": self.source}
        if last_compression is not None:
            usage["compression"] = last_compression
        return usage


Clock = Callable[[], datetime | None]
Remark = Callable[[int], str | None]  # turn -> what the user adds about themselves, or None


class AgentLoop:
    """Plays turns of one thread in memory, the way the agent runtime would.

    Before every model call it runs the engine's `auto_compact` (agents with
    `context_compression` only); a compaction that did something is its own
    step (source auto_compaction). Each model call is a step (source
    model_call): `llm_input_tokens` is what the call saw, and
    `next_llm_input_tokens` what the next call will see with the reply and the
    tool results added. Nothing here touches the database.
    """

    def __init__(
        self,
        state: ThreadContextState,
        profile: AgentProfile,
        *,
        rng: random.Random,
        topic: Topic,
        workdir: Workdir,
        summarizer: Summarizer,
        clock: Clock | None = None,
        remark: Remark | None = None,
    ) -> None:
        self.state = state
        self.profile = profile
        self.rng = rng
        self.topic = topic
        self.workdir = workdir
        self.summarizer = summarizer
        self.clock: Clock = clock or (lambda: None)
        self.model = FakeChatModel(rng, topic)
        self.tools = ToolOutputs(rng, topic)
        self.last_compression: dict[str, Any] | None = None
        self.remark = remark  # what the user adds about themselves at a turn (demo story)

    @property
    def turns_played(self) -> int:
        return sum(
            1
            for message in self.state.messages
            if isinstance(message, HumanMessage) and not is_summary_message(message)
        )

    def _usage(self, llm_input: int, next_input: int, state: ThreadContextState) -> UsageSnapshot:
        return usage_snapshot(
            llm_input_tokens=llm_input,
            next_llm_input_tokens=next_input,
            context_window=self.profile.context_window,
            summary_trigger_tokens=self.profile.trigger_tokens,
            summary_active=state.summary_active(),
        )

    def next_user_text(self) -> str:
        turn = self.turns_played
        return user_message(self.rng, self.topic, turn, self.remark(turn) if self.remark else None)

    def turn(
        self,
        user_text: str | None = None,
        *,
        include_user_chat: bool = True,
        max_model_calls: int | None = None,
    ) -> Iterator[Step]:
        """The steps of one turn; stops early (mid-turn) after `max_model_calls` calls."""
        text = user_text if user_text is not None else self.next_user_text()
        self.state = replace(self.state, messages=[*self.state.messages, HumanMessage(text)])
        pending_chat: list[tuple[str, str]] = [("user", text)] if include_user_chat else []
        calls = 0
        while True:
            llm_input: int | None = None
            if self.profile.capable:
                outcome = auto_compact(
                    self.state,
                    workdir=self.workdir,
                    summarizer=self.summarizer,
                    threshold_tokens=self.profile.trigger_tokens,
                    keep_messages=self.profile.summary_keep_messages,
                    tool_result_token_limit=self.profile.summary_tool_result_token_limit,
                )
                llm_input = outcome.after_tokens  # the count of the state the call will see
                if outcome.status == "completed":
                    self.state = outcome.state
                    at = self.clock()
                    self.last_compression = {
                        "source": "auto_compaction",
                        "at": at.isoformat() if at else None,
                        "reason": outcome.reason,
                        "before_tokens": outcome.before_tokens,
                        "after_tokens": outcome.after_tokens,
                        "compressed_messages": outcome.compressed_messages,
                        "file_path": outcome.file_path,
                        "summarized": outcome.summarized,
                    }
                    yield Step(
                        source="auto_compaction",
                        usage=self._usage(outcome.before_tokens, outcome.after_tokens, self.state),
                        state=self.state,
                        chat=[],
                        saved_files=list(outcome.saved_files),
                        measured_at=at,
                        compression=self.last_compression,
                        summarized=outcome.summarized,
                    )
            if llm_input is None:
                llm_input = count_state_tokens(self.state)
            reply = self.model.invoke(model_view(self.state))
            added: list[BaseMessage] = [reply]
            chat: list[tuple[str, str]] = [*pending_chat, ("assistant", message_text(reply))]
            pending_chat = []
            for call in reply.tool_calls:
                output = self.tools.run(call["name"], call["args"])
                added.append(
                    ToolMessage(content=output, tool_call_id=call["id"], name=call["name"])
                )
                chat.append(("tool", output))
            self.state = replace(self.state, messages=[*self.state.messages, *added])
            calls += 1
            yield Step(
                source="model_call",
                usage=self._usage(llm_input, count_state_tokens(self.state), self.state),
                state=self.state,
                chat=chat,
                saved_files=[],
                measured_at=self.clock(),
                awaiting_tools=bool(reply.tool_calls),
            )
            if not reply.tool_calls:
                return
            if max_model_calls is not None and calls >= max_model_calls:
                return


# ---------------------------------------------------------------------------
# `yuxi-dash simulate`: turns through the real intake, lifecycle and writes
# ---------------------------------------------------------------------------


@dataclass
class SimulatedThread(Record):
    thread_id: str
    user_id: str
    agent: str
    turns: int = 0
    model_calls: int = 0
    auto_compactions: int = 0
    summaries: int = 0
    summary_pressure_ratio: float = 0.0
    peak_pressure_ratio: float = 0.0
    version: int = 0


@dataclass
class SimulationReport:
    seed: int
    threads: list[SimulatedThread] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "threads": [thread.to_dict() for thread in self.threads]}


def _ensure_agent(session: Any, slug: str) -> AgentProfile:
    from yuxi_dash.service import upsert_agent
    from yuxi_dash.store.models import Agent

    row = session.scalar(sa.select(Agent).where(Agent.slug == slug))
    if row is not None:
        return AgentProfile.from_row(row)
    profile = sim_agent(slug)
    if profile is None:
        raise AgentNotFound(f"agent {slug} not found")
    return AgentProfile.from_row(upsert_agent(session, profile.slug, **profile.agent_fields()))


def simulate(
    settings: Settings | None = None,
    *,
    threads: int = 3,
    turns: int = 6,
    seed: int = 7,
    user_id: str | None = None,
    agent_slug: str | None = None,
    thread_prefix: str = "sim",
    pace_seconds: float = 0.0,
    summarizer: Summarizer | None = None,
) -> SimulationReport:
    """Play `turns` turns on each of `threads` threads through the service layer.

    Each turn is a real intake (`enqueue_request` with the user's message),
    dispatched to a running run, then every step is one `record_model_call`
    (state compare-and-swap, usage snapshot, chat record, tool-result index),
    and the run finishes `completed` (or `failed` if a step raised). Threads are
    named `{prefix}-{seed}-{n}`; running again continues them where they stopped.
    """
    from yuxi_dash.demo import DEMO_USERS
    from yuxi_dash.demo_story import remark_for
    from yuxi_dash.service import (
        create_thread,
        dispatch_next_request,
        enqueue_request,
        finish_run,
        record_model_call,
    )
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import Conversation
    from yuxi_dash.store.state_repository import load_state

    settings = settings or get_settings()
    if threads < 1 or turns < 1:
        raise InvalidInput("threads and turns must be at least 1")
    workdir = Workdir(settings.workdir)
    workdir.ensure_writable()
    summarizer = summarizer or get_summarizer(settings)
    report = SimulationReport(seed=seed)
    for number in range(1, threads + 1):
        thread_id = f"{thread_prefix}-{seed}-{number:02d}"
        with session_scope(settings) as session:
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            )
            if conv is None:
                profile = _ensure_agent(session, agent_slug or DEFAULT_SIM_AGENT)
                owner = user_id or DEMO_USERS[(seed + number) % len(DEMO_USERS)]
                create_thread(
                    session,
                    thread_id,
                    user_id=owner,
                    agent_slug=profile.slug,
                    title=topic_for(thread_id).title,
                )
            else:
                if conv.status == "deleted":
                    raise ThreadNotFound(f"thread {thread_id} was deleted; pick another seed")
                profile = _ensure_agent(session, conv.agent_slug)
                owner = conv.user_id
            stored = load_state(session, thread_id)
        state = stored.state if stored else ThreadContextState(thread_id=thread_id, messages=[])
        version = stored.version if stored else 0
        loop = AgentLoop(
            state,
            profile,
            rng=stable_rng("simulate", seed, thread_id, len(state.messages)),
            topic=topic_for(thread_id),
            workdir=workdir,
            summarizer=summarizer,
            # demo users tell their story (yuxi_dash.demo_story) here too
            remark=partial(remark_for, owner, number) if owner in DEMO_USERS else None,
        )
        result = SimulatedThread(thread_id=thread_id, user_id=owner, agent=profile.slug)
        for _ in range(turns):
            text = loop.next_user_text()
            enqueue_request(thread_id, content=text, settings=settings)
            run = dispatch_next_request(thread_id, settings=settings)
            if run is None:
                raise ThreadBusy(f"thread {thread_id} has another run in progress")
            try:
                for step in loop.turn(text, include_user_chat=False):
                    version = record_model_call(
                        thread_id,
                        state=step.state,
                        expected_version=version,
                        usage=step.usage,
                        source=step.source,
                        chat_messages=step.chat,
                        saved_files=step.saved_files,
                        token_usage=step.token_usage(loop.last_compression),
                        measured_at=step.measured_at,
                        settings=settings,
                    )
                    if step.source == "auto_compaction":
                        result.auto_compactions += 1
                        result.summaries += int(step.summarized)
                    else:
                        result.model_calls += 1
                    result.summary_pressure_ratio = step.usage.summary_pressure_ratio
                    result.peak_pressure_ratio = max(
                        result.peak_pressure_ratio, step.usage.summary_pressure_ratio
                    )
                    if pace_seconds:
                        time.sleep(pace_seconds)
            except BaseException:
                finish_run(run.id, status="failed", settings=settings)
                raise
            finish_run(run.id, status="completed", settings=settings)
            result.turns += 1
        result.version = version
        report.threads.append(result)
    return report
