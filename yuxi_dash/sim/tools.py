"""The simulated tools: realistic, deterministic outputs of the agent's tool calls.

Owns `ToolOutputs`: `query_kb` document records (with the metadata noise a real
retriever returns), `web_search` hits, `run_command` logs long enough to be
offloaded, and the large `content` of a `write_file` call. Every value comes
from the seeded generator it is given.

`SIM_TOOLS` are the same tools as LangChain tools for a `create_agent` graph
(`query_kb`, `web_search`, `run_command`, `write_file`): each call's output is
seeded by the thread (the run config's `thread_id`, which also picks the topic)
and the call's id.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool

from yuxi_dash.sim.topics import Topic, stable_rng, topic_for

_SITES = (
    ("docs.example.org", "Example Docs"),
    ("engineering.example.com", "Example Engineering Blog"),
    ("stackexchange.example.net", "Q&A Exchange"),
    ("news.example.io", "Tech News"),
    ("wiki.example.org", "Open Wiki"),
)
_LOG_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARNING", "ERROR")


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


def _call_outputs(config: RunnableConfig, tool_call_id: str) -> ToolOutputs:
    """The generator of one tool call: seeded by the thread and the call's id, nothing else.

    The model's call ids are deterministic, so a replayed thread gets the same
    outputs, and two calls run side by side by the tool node do not share a generator.
    """
    thread_id = str((config.get("configurable") or {}).get("thread_id") or "thread")
    return ToolOutputs(stable_rng("tool", thread_id, tool_call_id), topic_for(thread_id))


@tool
def query_kb(
    query: str,
    kb_id: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
    config: RunnableConfig,
) -> str:
    """Search a knowledge base; returns the matching chunks as JSON records."""
    return _call_outputs(config, tool_call_id).query_kb(query, kb_id)


@tool
def web_search(
    query: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
    config: RunnableConfig,
) -> str:
    """Search the web; returns the hits as JSON."""
    return _call_outputs(config, tool_call_id).web_search(query)


@tool
def run_command(
    command: str,
    tool_call_id: Annotated[str, InjectedToolCallId],
    config: RunnableConfig,
) -> str:
    """Run a shell command in the workspace; returns its output."""
    return _call_outputs(config, tool_call_id).run_command(command)


@tool
def write_file(path: str, content: str) -> str:
    """Write a file in the workspace."""
    return f"Wrote {len(content)} characters to {path}"


SIM_TOOLS: tuple[BaseTool, ...] = (query_kb, web_search, run_command, write_file)
