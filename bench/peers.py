"""The engines the compaction bench compares, and how it scores their views.

Engines take a thread's messages and a fresh directory: ``run_floor``,
``run_floor_writes``, ``run_floor_atomic``, ``run_ours`` (``compact_messages``,
either preview rule, into a ``Workdir``), ``Deepagents`` (deepagents 0.7's eviction
and argument truncation) and ``run_trim`` (langchain-core's ``trim_messages``). The
``Workdir`` and deepagents' middleware are built before the clock starts, as a
running agent holds them.
Measures: the share of evidence ids visible whole in a view, and whether the
offloaded results come back byte for byte from their files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from bench.corpus import ShapeThread
from bench.plain_rule import plain_preview
from yuxi_dash.compression import compact_messages, parse_saved_result
from yuxi_dash.compression.compaction import tool_result_text
from yuxi_dash.compression.previews.citation_records import citation, lookup
from yuxi_dash.compression.previews.preview import locate_records, structured_kind
from yuxi_dash.compression.previews.salvage import parse_records_text
from yuxi_dash.files import safe_fs
from yuxi_dash.files.workdir import Workdir, encode_text

TOKEN_LIMIT = 300  # budget 1,200 chars per preview
ARG_MAX = 2000


# -- engines ----------------------------------------------------------------------
def _large_texts(messages: list[BaseMessage]) -> list[str]:
    """The text of every tool result over the limit (what an offloader must handle)."""
    texts = []
    for message in messages:
        if isinstance(message, ToolMessage):
            text = tool_result_text(message)
            if text is not None and len(text) > TOKEN_LIMIT * 4:
                texts.append(text)
    return texts


def _floor_one(text: str) -> tuple[bytes, str]:
    """The floor's work on one result: its UTF-8 bytes, their SHA-256, and a JSON parse
    when it looks like JSON; (bytes, hex digest)."""
    data = text.encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(data).hexdigest()
    if text[:1] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
    return data, digest


def run_floor(messages: list[BaseMessage], _root: Path) -> Any:
    for text in _large_texts(messages):
        _floor_one(text)
    return None


def run_floor_atomic(messages: list[BaseMessage], root: Path) -> Any:
    """The floor plus each file published whole, as ``Workdir`` publishes one
    (``files.safe_fs.link_new_file``: written unnamed, then linked under its name), so that no
    reader ever sees a partial file: what the file writes cost with that guarantee."""
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for text in _large_texts(messages):
            data, digest = _floor_one(text)
            safe_fs.link_new_file(dir_fd, f"{digest[:16]}.txt", data)
    finally:
        os.close(dir_fd)
    return None


def run_floor_writes(messages: list[BaseMessage], root: Path) -> Any:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for text in _large_texts(messages):
        data, digest = _floor_one(text)
        try:
            fd = os.open(root / f"{digest[:16]}.txt", flags, 0o644)
        except FileExistsError:
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return None


def run_ours(messages: list[BaseMessage], workdir: Workdir, rule: str = "ours") -> Any:
    """``compact_messages`` into ``workdir``, built before the clock starts (as deepagents'
    backend is, and as the middleware and the service hold theirs); ``rule="plain"``
    swaps in the modelled system's preview rule (``bench.plain_rule``)."""
    with plain_preview() if rule == "plain" else nullcontext():
        return compact_messages(
            messages, workdir, tool_result_token_limit=TOKEN_LIMIT, tool_arg_max_length=ARG_MAX
        )


@dataclass
class Deepagents:
    """deepagents 0.7's eviction and argument truncation, built before the clock starts."""

    filesystem: Any
    summarization: Any

    @classmethod
    def build(cls, root: Path) -> Deepagents:
        from deepagents.backends import FilesystemBackend
        from deepagents.middleware import FilesystemMiddleware, SummarizationMiddleware

        backend = FilesystemBackend(root_dir=root, virtual_mode=True)
        filesystem = FilesystemMiddleware(
            backend=backend, tool_token_limit_before_evict=TOKEN_LIMIT
        )
        summarization = SummarizationMiddleware(
            GenericFakeChatModel(messages=iter(())),
            backend=backend,
            trigger=("messages", 10**9),
            truncate_args_settings={
                "trigger": ("messages", 0),
                "keep": ("messages", 0),
                "max_length": ARG_MAX,
            },
        )
        return cls(filesystem, summarization)

    def run(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        intercept = self.filesystem._intercept_large_tool_result
        evicted = [intercept(m) if isinstance(m, ToolMessage) else m for m in messages]
        truncated, _changed = self.summarization._truncate_args(evicted, 0)
        return truncated


def run_trim(messages: list[BaseMessage], max_tokens: int) -> list[BaseMessage]:
    return trim_messages(
        messages,
        max_tokens=max_tokens,
        token_counter=count_tokens_approximately,
        strategy="last",
        start_on="human",
        allow_partial=False,
    )


# -- measures -------------------------------------------------------------------------
def view_text(view: list[BaseMessage]) -> str:
    parts = []
    for message in view:
        if isinstance(message.content, str):
            parts.append(message.content)
        else:
            parts.extend(
                b["text"] if isinstance(b, dict) and isinstance(b.get("text"), str) else str(b)
                for b in message.content
            )
    return "\n".join(parts)


def visible(view: list[BaseMessage], evidence: list[str]) -> float:
    """Share of evidence ids that appear whole in the view (as written or JSON-escaped)."""
    text = view_text(view)
    found = sum(1 for key in evidence if key in text or json.dumps(key)[1:-1] in text)
    return found / max(1, len(evidence))


def recover_ours(thread: ShapeThread, view: list[BaseMessage], root: Path) -> tuple[int, int]:
    """(results whose full text is back byte for byte from the saved file, results changed)."""
    ok = changed = 0
    workdir = Workdir(root)
    for original, shown in zip(thread.messages, view, strict=True):
        if not isinstance(original, ToolMessage) or shown.content == original.content:
            continue
        changed += 1
        saved = parse_saved_result(shown.content)
        text = tool_result_text(original)
        if saved is None or text is None:
            continue
        data = (root / saved.path).read_bytes()
        ok += data == encode_text(text) and workdir.verify(saved.path, saved.sha256) == "ok"
    return ok, changed


def recover_deepagents(
    thread: ShapeThread, view: list[BaseMessage], root: Path
) -> tuple[int, int, int]:
    """(files equal to deepagents' text of the result, equal to the result's joined blocks, changed)."""
    from deepagents.middleware._message_eviction import _extract_text_from_message

    own = exact = changed = 0
    for original, shown in zip(thread.messages, view, strict=True):
        if not isinstance(original, ToolMessage) or shown.content == original.content:
            continue
        changed += 1
        # the path the message gives the model: "... saved in the filesystem at this path: /p"
        found = re.search(r"at this path: (\S+)", view_text([shown]))
        path = root / found.group(1).lstrip("/") if found else root / "missing"
        if not path.is_file():
            continue
        data = path.read_bytes()
        own += data == _extract_text_from_message(original).encode("utf-8")
        exact += data == encode_text(tool_result_text(original) or "")
    return own, exact, changed


@dataclass
class Citations:
    """What the previews of a view let a model cite, over a thread's query_kb records."""

    kb_records: int = 0
    citable: int = 0  # id with its source (or filename) and chunk_index, from a preview
    kb_records_12_22: int = 0  # of results holding 12-22 records
    citable_12_22: int = 0
    shown: int = 0  # records shown in structured previews (both kinds)
    whole: int = 0  # of them, with every citation field of the record, as it is
    lead_bodies: list[int] = field(default_factory=list)  # body chars of each leading record

    def add(self, other: Citations) -> None:
        for name in ("kb_records", "citable", "kb_records_12_22", "citable_12_22"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.shown += other.shown
        self.whole += other.whole
        self.lead_bodies += other.lead_bodies


def _shown_records(preview: str) -> list[dict[str, Any]] | None:
    """The records of a structured preview, each read as ``common`` overlaid with it."""
    try:
        document = json.loads(preview)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return None
    common = document.get("common") or {}
    merged = []
    for record in document["results"]:
        meta = {**common.get("metadata", {}), **record.get("metadata", {})}
        merged.append({**common, **record, **({"metadata": meta} if meta else {})})
    return merged


def citations(thread: ShapeThread, view: list[BaseMessage]) -> Citations:
    """Records citable from the previews in ``view`` (beside the thread's own results)."""
    out = Citations()
    for original, shown in zip(thread.messages, view, strict=True):
        if not isinstance(original, ToolMessage):
            continue
        kind = structured_kind(original.name)
        parsed = parse_records_text((tool_result_text(original) or "").lstrip())
        located = None if parsed is None else locate_records(parsed[0])
        if kind is None or located is None:
            continue
        records = [r for r in located[0] if isinstance(r, dict)]
        saved = parse_saved_result(shown.content)
        if saved is None:
            continue  # not offloaded: the whole result is in the view
        previewed = _shown_records(saved.preview) or []
        if kind == "knowledge_base":
            out.kb_records += len(records)
            out.kb_records_12_22 += len(records) if 12 <= len(records) <= 22 else 0
        if previewed and isinstance(body_of := previewed[0], dict):
            text = next(
                (
                    body_of[k]
                    for k in ("content", "text", "snippet", "summary")
                    if isinstance(body_of.get(k), str)
                ),
                "",
            )
            out.lead_bodies.append(len(text))
        for record, seen in zip(records, previewed, strict=False):
            out.shown += 1
            out.whole += all(lookup(seen, f) == value for f, value in citation(record, kind))
            if kind != "knowledge_base":
                continue
            has_source = not all(
                lookup(seen, f) in (None, "")
                for f in ((False, "source"), (True, "source"), (True, "filename"))
            )
            chunk = lookup(record, (True, "chunk_index")) is None or (
                lookup(seen, (True, "chunk_index")) is not None
            )
            if seen.get("id") is not None and has_source and chunk:
                out.citable += 1
                out.citable_12_22 += 12 <= len(records) <= 22
    return out


@dataclass
class Quality:
    visible: float
    recoverable: str
    view_chars: int
    cites: Citations | None = None


def quality(thread: ShapeThread, base: Path, trim_tokens: int) -> dict[str, Quality]:
    """Visible evidence, recoverability and view size of every engine on one thread."""
    out: dict[str, Quality] = {}
    results = len(thread.results)
    for name, rule in (("ours", "ours"), ("yuxi-plain", "plain")):
        workdir = _fresh_workdir(base)
        view = run_ours(thread.messages, workdir, rule)
        ok, changed = recover_ours(thread, view, workdir.root)
        out[name] = Quality(
            visible(view, thread.evidence),
            f"{ok}/{changed} files",
            len(view_text(view)),
            citations(thread, view),
        )
    root = _fresh_dir(base)
    (root / "large_tool_results").mkdir()
    view = Deepagents.build(root).run(thread.messages)
    own, exact, changed = recover_deepagents(thread, view, root)
    out["deepagents"] = Quality(
        visible(view, thread.evidence),
        f"{own}/{changed} files ({exact} as joined)",
        len(view_text(view)),
    )
    view = run_trim(thread.messages, trim_tokens)
    kept = sum(1 for m in view if isinstance(m, ToolMessage))
    out["trim"] = Quality(
        visible(view, thread.evidence), f"{kept}/{results} kept, 0 saved", len(view_text(view))
    )
    for name in ("floor", "floor+writes", "floor+atomic"):
        out[name] = Quality(float("nan"), "-", 0)
    return out


# -- directories ------------------------------------------------------------------
def _fresh_dir(base: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=base))


def _fresh_workdir(base: Path) -> Workdir:
    """A set-up workdir, as a deployment has it: root, marker and output directories."""
    workdir = Workdir(_fresh_dir(base) / "workdir")
    workdir.initialize()
    workdir.ensure_writable()
    return workdir
