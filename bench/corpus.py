"""Seeded evidence threads of varied shapes, for the compaction bench.

Every shape is one thread (human turns, tool calls, tool results, answers) of
``results × scale`` tool results; the same seed gives the same bytes. The
evidence of a thread is every query_kb record id and web_search url that
appears whole in a tool result's own text: what a model would cite.

Shapes (``SHAPES``):

- ``kb_full_cjk``: query_kb, 12 records, Yuxi's full metadata (filename,
  title, chunk_index and five scores: score, rerank_score, hybrid_score,
  graph_score, distance; raw float scores), long CJK titles and file names;
- ``kb_full``: the same metadata, ASCII titles, 8-16 records;
- ``kb_lean``: query_kb records with id, score and a short metadata
  (source, chunk_index) only;
- ``kb_long_content``: 8-12 records of 6-20k characters each;
- ``kb_short_content``: 12-16 records of 8-60 characters each, full metadata;
- ``web_snippets``: web_search with snippets, publish times (dates and
  ISO stamps) and site names (display names, bare hosts, none), long urls;
- ``web_no_snippets``: web_search with title/url/score only (some with a
  ``content`` body), a bare list or a ``results`` object;
- ``nested_json``: a ``{"code", "data": {"query", "results"}}`` envelope, nested
  metadata objects, bodies that are JSON text themselves (escaped quotes);
- ``mcp_blocks``: MCP-named tools (``mcp__kb__query_kb``) whose content is a
  list of text blocks that split the JSON anywhere;
- ``broken_json``: query_kb / web_search text that does not parse: cut
  mid-record, trailing text after the JSON, or a Python repr (our engine
  salvages the leading complete records);
- ``mixed``: all of the above interleaved with command output, small results
  under the limit, a repeated result and long ``write_file`` arguments.

Run ``python bench/corpus.py`` for a summary of the shapes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

WORDS = (
    "retention policy customer churn quarterly revenue onboarding cohort analysis metric "
    "dashboard latency incident postmortem migration schema index replica failover backup "
    "refund annual plan invoice compliance audit region vendor contract renewal"
).split()
CJK_WORDS = (
    "数据 保留 策略 客户 分析 报告 年度 实施 细则 修订版 管理 要求 分类 分级 安全 合规 "
    "审计 流程 规范 退款 发票 合同 续约 供应商 区域 指标 看板 延迟 故障 复盘 迁移 备份 "
    "知识库 检索 增强 生成 向量 索引 重排序 混合 图谱"
).split()
HOSTS = (
    ("docs.example.com", "Example Docs"),
    ("blog.example.org", "Example Blog"),
    ("news.example.net", "Example News"),
    ("zhuanlan.zhihu.com", "知乎专栏"),
    ("www.gov.cn", "中国政府网"),
)


@dataclass
class ShapeThread:
    """One corpus thread: its messages and the evidence (ids, urls) its results hold."""

    shape: str
    description: str
    messages: list[BaseMessage]
    evidence: list[str] = field(default_factory=list)

    @property
    def results(self) -> list[ToolMessage]:
        return [m for m in self.messages if isinstance(m, ToolMessage)]


# -- text ----------------------------------------------------------------------
def _words(rng: random.Random, chars: int, *, cjk_share: float = 0.3) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(CJK_WORDS) if rng.random() < cjk_share else rng.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _cjk(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(CJK_WORDS)
        out.append(word)
        size += len(word)
    return "".join(out)[:chars]


def _uuid(rng: random.Random) -> str:
    return "%08x-%04x-%04x-%04x-%012x" % (  # noqa: UP031 - fixed-width hex fields
        rng.getrandbits(32),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(48),
    )


# -- query_kb records ----------------------------------------------------------------
def _kb_full_record(
    rng: random.Random, kb_id: str, rank: int, *, cjk: bool, body: int, raw: bool
) -> dict[str, object]:
    """A chunk with Yuxi's full metadata: the listed fields at the top and again nested."""
    file_id = f"file_{rng.getrandbits(48):012x}"
    if cjk:
        title = f"关于{rng.randint(2019, 2026)}年度{_cjk(rng, rng.randint(24, 90))}（修订版）"
        filename = f"{_cjk(rng, rng.randint(10, 30))}_v{rng.randint(1, 9)}.{rng.randint(0, 9)}.pdf"
    else:
        title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} handbook, section {rank}"
        filename = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rank}.pdf"
    source = f"minio://knowledge-base/{kb_id}/{file_id}/{filename}"

    def score() -> float:
        return rng.random() * 0.6 + 0.3 if raw else round(rng.random(), 4)

    primary, distance = score(), score()
    chunk_id = _uuid(rng)
    return {
        "id": chunk_id,
        "kb_id": kb_id,
        "file_id": file_id,
        "title": title,
        "source": source,
        "score": primary,
        "distance": distance,
        "content": _words(rng, body, cjk_share=0.6 if cjk else 0.2),
        "metadata": {
            "source": source,
            "filename": filename,
            "title": title,
            "chunk_index": rank + rng.randint(0, 40),
            "score": primary,
            "rerank_score": score(),
            "hybrid_score": score(),
            "graph_score": score(),
            "distance": distance,
            "file_id": file_id,
            "kb_id": kb_id,
            "chunk_id": chunk_id,
            "page": rng.randint(1, 300),
            "embedding_model": "bge-m3",
        },
    }


def _kb_lean_record(rng: random.Random, rank: int, body: int) -> dict[str, object]:
    return {
        "id": f"chunk-{rng.getrandbits(40):010x}",
        "score": round(rng.random(), 3),
        "content": _words(rng, body),
        "metadata": {"source": f"docs/{rng.choice(WORDS)}.md", "chunk_index": rank},
    }


def kb_payload(
    rng: random.Random,
    *,
    records: int,
    style: str = "full",
    cjk: bool = False,
    body: tuple[int, int] = (400, 1100),
    raw_scores: bool = True,
) -> tuple[dict[str, Any], list[str]]:
    """A query_kb result object and its record ids."""
    kb_id = f"kb_{rng.getrandbits(64):016x}"
    rows: list[dict[str, Any]] = []
    for rank in range(records):
        size = rng.randint(*body)
        if style == "lean":
            rows.append(_kb_lean_record(rng, rank, size))
        else:
            rows.append(_kb_full_record(rng, kb_id, rank, cjk=cjk, body=size, raw=raw_scores))
    query = _cjk(rng, rng.randint(8, 30)) if cjk else _words(rng, rng.randint(20, 60))
    payload: dict[str, Any] = {
        "query": query,
        "kb_id": kb_id,
        "response_time": round(rng.random() * 2, 3),
        "results": rows,
    }
    return payload, [str(row["id"]) for row in rows]


# -- web_search records ------------------------------------------------------------
def web_payload(
    rng: random.Random, *, records: int, snippets: bool, bare_list: bool = False
) -> tuple[Any, list[str]]:
    """A web_search result (object or bare list) and its urls."""
    rows: list[dict[str, object]] = []
    for rank in range(records):
        host, display = rng.choice(HOSTS)
        path = "/".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        url = f"https://{host}/{path}/{rng.getrandbits(40):010x}"
        if rng.random() < 0.4:
            url += f"?utm_source=search&ref={rng.getrandbits(32):08x}&lang=zh-CN"
        row: dict[str, object] = {
            "title": f"{rng.choice(WORDS).title()} {_cjk(rng, rng.randint(0, 20))} guide {rank}",
            "url": url,
        }
        site = rng.choice((display, host, "", None))
        if site is not None:
            row["site_name"] = site
        when = rng.choice(("2026-03-01", "2025-11-20T08:31:00+08:00", None, ""))
        if when is not None:
            row["publish_time"] = when
        row["score"] = round(rng.random(), 4) if rng.random() < 0.8 else rng.random()
        if snippets:
            row["snippet"] = _words(rng, rng.randint(120, 400), cjk_share=0.5)
            row["content"] = _words(rng, rng.randint(600, 2500), cjk_share=0.5)
        elif rng.random() < 0.3:
            row["content"] = _words(rng, rng.randint(300, 900))
        row["raw_content"] = None
        row["images"] = []
        row["favicon"] = f"https://{host}/favicon.ico"
        rows.append(row)
    urls = [str(row["url"]) for row in rows]
    if bare_list:
        return rows, urls
    return {"query": _words(rng, rng.randint(15, 50)), "response_time": 0.8, "results": rows}, urls


# -- other tool output -------------------------------------------------------------
def command_output(rng: random.Random) -> str:
    lines = [
        f"{n:05d} {rng.choice(['INFO', 'WARN', 'DEBUG'])} {_words(rng, 90, cjk_share=0.0)}"
        for n in range(rng.randint(40, 120))
    ]
    return "\n".join(lines)


def _dumps(payload: object, rng: random.Random) -> str:
    """JSON as tools write it: compact or spaced, UTF-8 kept or \\u-escaped, some indented."""
    style = rng.random()
    if style < 0.5:
        return json.dumps(payload, ensure_ascii=False)
    if style < 0.8:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if style < 0.9:
        return json.dumps(payload)  # \\uXXXX escapes
    return json.dumps(payload, ensure_ascii=False, indent=2)


def _present(content: str, ids: list[str]) -> list[str]:
    """The ids that appear whole in ``content`` (as written or JSON-escaped)."""
    found = []
    for key in ids:
        if key in content or json.dumps(key)[1:-1] in content:
            found.append(key)
    return found


# -- threads -------------------------------------------------------------------------
Content = str | list[str | dict[Any, Any]]  # a ToolMessage's content


class _Thread:
    def __init__(self, shape: str, description: str, rng: random.Random) -> None:
        self.rng = rng
        self.thread = ShapeThread(shape, description, [])
        self.calls = 0
        self.last: tuple[str, Content, list[str]] | None = None

    def add(self, tool: str, content: Content, evidence: list[str], args: dict) -> None:
        rng = self.rng
        messages = self.thread.messages
        if self.calls % 3 == 0:
            messages.append(HumanMessage(content=f"Step {self.calls}: {_words(rng, 90)}"))
        call_id = f"call_{self.thread.shape}_{self.calls:04d}"
        self.calls += 1
        messages.append(
            AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": call_id}])
        )
        messages.append(ToolMessage(content=content, tool_call_id=call_id, name=tool))
        text = (
            content
            if isinstance(content, str)
            else "".join(
                b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        )
        self.thread.evidence.extend(_present(text, evidence))
        if evidence:
            self.last = (tool, content, evidence)
        if self.calls % 3 == 0:
            messages.append(AIMessage(content=f"Noted. {_words(rng, 160)}"))

    def write_file(self) -> None:
        call_id = f"call_{self.thread.shape}_{self.calls:04d}"
        self.calls += 1
        body = _words(self.rng, self.rng.randint(3000, 9000))
        args = {"file_path": f"/notes/{self.calls}.md", "content": body}
        self.thread.messages.append(
            AIMessage(content="", tool_calls=[{"name": "write_file", "args": args, "id": call_id}])
        )
        self.thread.messages.append(
            ToolMessage(content="Updated file", tool_call_id=call_id, name="write_file")
        )


def _kb_args(rng: random.Random) -> dict[str, object]:
    return {"query": _words(rng, 30), "kb_id": "kb_support", "top_k": 12}


def _web_args(rng: random.Random) -> dict[str, object]:
    return {"query": _words(rng, 30), "max_results": 12}


def _kb_full_cjk(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, ids = kb_payload(t.rng, records=12, cjk=True)
        t.add("query_kb", _dumps(payload, t.rng), ids, _kb_args(t.rng))


def _kb_full(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, ids = kb_payload(t.rng, records=t.rng.randint(8, 16), raw_scores=False)
        t.add("query_kb", _dumps(payload, t.rng), ids, _kb_args(t.rng))


def _kb_lean(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, ids = kb_payload(t.rng, records=t.rng.randint(8, 14), style="lean")
        t.add("query_kb", _dumps(payload, t.rng), ids, _kb_args(t.rng))


def _kb_long(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, ids = kb_payload(t.rng, records=t.rng.randint(8, 12), body=(6000, 20000))
        t.add("query_kb", _dumps(payload, t.rng), ids, _kb_args(t.rng))


def _kb_short(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, ids = kb_payload(t.rng, records=t.rng.randint(12, 16), body=(8, 60))
        t.add("query_kb", _dumps(payload, t.rng), ids, _kb_args(t.rng))


def _web_snippets(t: _Thread, n: int) -> None:
    for _ in range(n):
        payload, urls = web_payload(t.rng, records=t.rng.randint(8, 12), snippets=True)
        t.add("web_search", _dumps(payload, t.rng), urls, _web_args(t.rng))


def _web_no_snippets(t: _Thread, n: int) -> None:
    for index in range(n):
        payload, urls = web_payload(
            t.rng, records=t.rng.randint(10, 16), snippets=False, bare_list=index % 2 == 1
        )
        t.add("web_search", _dumps(payload, t.rng), urls, _web_args(t.rng))


def _nested(t: _Thread, n: int) -> None:
    rng = t.rng
    for _ in range(n):
        payload, ids = kb_payload(rng, records=12, body=(200, 700))
        for row in payload["results"]:
            row["metadata"]["headers"] = {"h1": _words(rng, 20), "h2": {"text": _words(rng, 30)}}
            row["metadata"]["bbox"] = [rng.random() for _ in range(4)]
            table = [{"row": r, "cells": [_words(rng, 12) for _ in range(3)]} for r in range(4)]
            row["content"] = json.dumps({"table": table, "caption": _words(rng, 60)})
        envelope = {"code": 0, "message": "ok", "data": payload, "trace_id": _uuid(rng)}
        t.add("query_kb", _dumps(envelope, rng), ids, _kb_args(rng))


def _split_blocks(rng: random.Random, text: str) -> list[str | dict[Any, Any]]:
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 4))))
    bounds = [0, *cuts, len(text)]
    return [{"type": "text", "text": text[a:b]} for a, b in zip(bounds, bounds[1:], strict=False)]


def _mcp(t: _Thread, n: int) -> None:
    rng = t.rng
    for index in range(n):
        if index % 2 == 0:
            payload, ids = kb_payload(rng, records=12, cjk=index % 4 == 0)
            tool = "mcp__yuxi_kb__query_kb"
        else:
            payload, ids = web_payload(rng, records=10, snippets=True)
            tool = "mcp__search__web_search"
        t.add(tool, _split_blocks(rng, _dumps(payload, rng)), ids, _kb_args(rng))


def _broken(t: _Thread, n: int) -> None:
    rng = t.rng
    for index in range(n):
        if index % 2 == 0:
            payload, ids = kb_payload(rng, records=12)
            tool = "query_kb"
        else:
            payload, ids = web_payload(rng, records=10, snippets=True)
            tool = "web_search"
        text = json.dumps(payload, ensure_ascii=False)
        kind = index % 3
        if kind == 0:  # cut mid-record, as an output cap does
            text = text[: rng.randint(len(text) // 3, len(text) * 9 // 10)]
        elif kind == 1:  # valid JSON followed by a server's note
            text += "\n\n[results truncated by the search service: 12 more]"
        else:  # a tool that returned str(dict)
            text = repr(payload)
        t.add(tool, text, ids, _kb_args(rng))


def _mixed(t: _Thread, n: int) -> None:
    rng = t.rng
    builders: list[Callable[[_Thread, int], None]] = [
        _kb_full_cjk,
        _kb_full,
        _kb_lean,
        _kb_short,
        _web_snippets,
        _web_no_snippets,
        _nested,
        _mcp,
    ]
    for index in range(n):
        roll = index % 6
        if roll == 0:
            t.add("run_command", command_output(rng), [], {"cmd": "tail -n 200 app.log"})
        elif roll == 1:
            payload, ids = kb_payload(rng, records=2, style="lean", body=(40, 120))
            t.add("query_kb", json.dumps(payload), ids, _kb_args(rng))  # under the limit
        elif roll == 2:
            t.write_file()
        elif roll == 3 and t.last is not None:
            t.add(*t.last, _kb_args(rng))  # the same query again, the same result
        else:
            rng.choice(builders)(t, 1)


SHAPES: dict[str, tuple[str, Callable[[_Thread, int], None]]] = {
    "kb_full_cjk": ("query_kb, 12 records, full metadata, long CJK titles", _kb_full_cjk),
    "kb_full": ("query_kb, 8-16 records, full metadata, ASCII titles", _kb_full),
    "kb_lean": ("query_kb, lean metadata (source, chunk_index)", _kb_lean),
    "kb_long_content": ("query_kb, bodies of 6-20k chars", _kb_long),
    "kb_short_content": ("query_kb, bodies of 8-60 chars, full metadata", _kb_short),
    "web_snippets": ("web_search, snippets, publish times, site names", _web_snippets),
    "web_no_snippets": ("web_search, title/url/score only, bare lists", _web_no_snippets),
    "nested_json": ("query_kb in a data envelope, nested metadata, JSON bodies", _nested),
    "mcp_blocks": ("MCP tools, JSON split over text blocks", _mcp),
    "broken_json": ("cut, trailing text, Python repr (salvaged records)", _broken),
    "mixed": ("all shapes, command output, small results, repeats, write_file", _mixed),
}


def build_shape(shape: str, *, results: int = 16, scale: int = 1, seed: int = 12) -> ShapeThread:
    """One shape's thread: ``results × scale`` tool calls, deterministic for a seed."""
    description, builder = SHAPES[shape]
    rng = random.Random(f"{seed}:{shape}:{scale}")
    thread = _Thread(shape, description, rng)
    builder(thread, results * scale)
    return thread.thread


def build_corpus(*, results: int = 16, scale: int = 1, seed: int = 12) -> list[ShapeThread]:
    """Every shape's thread, in ``SHAPES`` order."""
    return [build_shape(name, results=results, scale=scale, seed=seed) for name in SHAPES]


def main() -> int:
    for thread in build_corpus():
        texts = [
            m.content if isinstance(m.content, str) else json.dumps(m.content)
            for m in thread.results
        ]
        size = sum(len(t.encode("utf-8")) for t in texts)
        print(
            f"{thread.shape:<17} {len(thread.messages):>4} messages {len(thread.results):>3} results "
            f"{size / 1e6:6.2f} MB  {len(thread.evidence):>4} evidence ids  {thread.description}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
