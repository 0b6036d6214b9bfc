"""Summarizers behind one interface: an OpenAI-compatible chat model and an offline one.

Both produce the same five sections: SESSION INTENT, USER
REQUIREMENTS AND PREFERENCES, PROGRESS AND DECISIONS, ARTIFACTS AND REFERENCES,
NEXT STEPS.

- ``OpenAICompatibleSummarizer`` talks to any OpenAI-compatible endpoint (OpenAI,
  a local Ollama or vLLM) with base URL, key, model and timeout from settings.
- ``ExtractiveSummarizer`` builds the sections from the transcript itself, no
  model: user goals and constraints from human turns, decisions from AI turns and
  tool calls, artifacts (file paths, saved tool-result paths, document ids, URLs),
  next steps. It says it is extractive. It is the default when no model is set.

Any failure or an empty summary raises ``SummarizerFailed``; error text never
becomes a summary. Messages carry user content: none of it is logged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from yuxi_dash.compression.compaction import parse_saved_result
from yuxi_dash.compression.previews.preview import clip_head_tail
from yuxi_dash.compression.thread_state import message_text
from yuxi_dash.errors import SummarizerFailed
from yuxi_dash.settings import Settings

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

SECTIONS = (
    "SESSION INTENT",
    "USER REQUIREMENTS AND PREFERENCES",
    "PROGRESS AND DECISIONS",
    "ARTIFACTS AND REFERENCES",
    "NEXT STEPS",
)
EXTRACTIVE_NOTE = (
    "(Extractive summary: built offline from the transcript's own sentences; "
    "no language model was used.)"
)

SUMMARY_SYSTEM_PROMPT = """You compress the earlier part of a conversation between a user and an \
AI agent so the agent can continue the work without the original messages.
Write a summary with exactly these five sections, each a heading followed by short bullet points:

SESSION INTENT
What the user is trying to achieve overall.

USER REQUIREMENTS AND PREFERENCES
Every explicit requirement, constraint and preference the user stated (formats, languages, \
limits, things to avoid). Keep the user's own wording for hard constraints.

PROGRESS AND DECISIONS
What has been done, what was decided and why, what failed and should not be retried.

ARTIFACTS AND REFERENCES
Exact file paths, saved tool-result paths, document ids, URLs, commands, names and numbers \
that later steps may need. Copy them verbatim.

NEXT STEPS
What remains to do, in order, including any question awaiting the user's answer.

Rules: do not invent anything that is not in the transcript; prefer precision over prose; \
if a previous summary is given, merge it with the new messages so nothing it recorded is lost."""

TRANSCRIPT_MESSAGE_CHARS = 6000


@runtime_checkable
class Summarizer(Protocol):
    """Turns the summarized part of a thread into summary text (raise SummarizerFailed)."""

    name: str
    extractive: bool

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str: ...


def render_transcript(messages: Iterable[BaseMessage], *, max_message_chars: int = 0) -> str:
    """A plain-text transcript: one block per message, tool calls spelled out."""
    blocks: list[str] = []
    for message in messages:
        text = message_text(message)
        if max_message_chars and len(text) > max_message_chars:
            text = clip_head_tail(text, max_message_chars)
        if isinstance(message, HumanMessage):
            header = "USER"
        elif isinstance(message, AIMessage):
            header = "ASSISTANT"
        elif isinstance(message, ToolMessage):
            header = f"TOOL RESULT ({message.name or 'tool'})"
        elif isinstance(message, SystemMessage):
            header = "SYSTEM"
        else:
            header = message.type.upper()
        lines = [f"{header}:", text] if text else [f"{header}:"]
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
                if max_message_chars:
                    args = clip_head_tail(args, max_message_chars // 4)
                lines.append(f"-> calls {call.get('name')}({args})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# -- OpenAI-compatible ---------------------------------------------------------
SUMMARIZER_MAX_RETRIES = 1  # the model client's retries: a call may take (1 + this) timeouts


class OpenAICompatibleSummarizer:
    """Summaries from an OpenAI-compatible chat-completions endpoint."""

    extractive = False

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = SUMMARIZER_MAX_RETRIES,
    ) -> None:
        import openai  # deferred: the offline path never needs the client

        self.model = model
        self.name = f"openai-compatible:{model}"
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",  # local servers (Ollama, vLLM) accept any key
            timeout=timeout_seconds,
            max_retries=max_retries,
        )

    def build_messages(
        self, messages: Sequence[BaseMessage], previous_summary: str | None
    ) -> list[ChatCompletionMessageParam]:
        parts = []
        if previous_summary:
            parts.append(f"PREVIOUS SUMMARY:\n{previous_summary}")
        transcript = render_transcript(messages, max_message_chars=TRANSCRIPT_MESSAGE_CHARS)
        parts.append(f"NEW MESSAGES TO SUMMARIZE:\n{transcript}")
        return [
            {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=self.build_messages(messages, previous_summary),
                temperature=0,
            )
            content = response.choices[0].message.content if response.choices else None
        except Exception as exc:
            raise SummarizerFailed(
                f"summarizer request failed ({type(exc).__name__}); nothing was written"
            ) from exc
        if not isinstance(content, str) or not content.strip():
            raise SummarizerFailed("summarizer returned an empty summary; nothing was written")
        return content.strip()


# -- extractive ----------------------------------------------------------------
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？；;])\s+|\n+")
URL_PATTERN = re.compile(r"https?://[^\s<>\"'`)\]}，。]+")  # also the evidence ledger's
_FILE_PATH = re.compile(
    r"(?<![\w/.:-])(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-]+\.(?:py|md|txt|json|jsonl|csv|tsv|yaml|yml|toml|"
    r"ini|cfg|sql|sh|js|ts|tsx|jsx|html|css|xml|pdf|docx?|xlsx?|pptx?|log|ipynb|rs|go|java|c|h|cpp)\b"
)
_DOC_ID_KEYS = ("id", "file_id", "doc_id", "document_id", "kb_id")
_REQUIREMENT_CUES = re.compile(
    r"\b(must|should|need|needs|want|wants|prefer|please|always|never|only|don't|do not|avoid|"
    r"require|required|make sure|ensure|no more than|at least|at most|without)\b|"
    r"(需要|必须|不要|请|希望|务必|只|别)",
    re.IGNORECASE,
)
_DECISION_CUES = re.compile(
    r"\b(decided|decide|chose|choose|will|going to|plan|done|completed|created|updated|fixed|"
    r"wrote|saved|found|confirmed|switched|used|using|added|removed|failed|cannot|can't)\b|"
    r"(决定|完成|已|采用|修复|创建)",
    re.IGNORECASE,
)
_NEXT_CUES = re.compile(
    r"\b(next|then|todo|to do|remaining|still need|will|follow up|after that|pending)\b|"
    r"(下一步|接下来|待办|然后)",
    re.IGNORECASE,
)
_SECTION_LINE = re.compile(r"^#*\s*(" + "|".join(SECTIONS) + r")\s*:?\s*$")
BULLET_CHARS = 240
ARTIFACTS_PER_KIND = 12  # saved results, documents, urls, files: the newest of each
SECTION_LIMITS = {
    "SESSION INTENT": 4,
    "USER REQUIREMENTS AND PREFERENCES": 12,
    "PROGRESS AND DECISIONS": 14,
    "ARTIFACTS AND REFERENCES": 4 * ARTIFACTS_PER_KIND,
    "NEXT STEPS": 6,
}


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_SPLIT.split(text) if part and part.strip()]


_LIST_MARKS = re.compile(r"^(?:[-*•]\s+)+")  # the text's own list marks: one bullet is ours


def _bullet(text: str) -> str:
    return clip_head_tail(_LIST_MARKS.sub("", " ".join(text.split())), BULLET_CHARS)


def _doc_ids(content: str) -> list[str]:
    """Document identities in a JSON tool result: one entry per record, plus the kb_id."""
    stripped = content.strip()
    if not stripped.startswith(("{", "[")):
        return []
    try:
        payload = json.loads(stripped)
    except (ValueError, RecursionError):
        return []
    records: list[Any] = []
    found: list[str] = []
    if isinstance(payload, dict):
        kb_id = payload.get("kb_id")
        if isinstance(kb_id, str | int) and not isinstance(kb_id, bool) and kb_id != "":
            found.append(f"kb_id={kb_id}")
        results = payload.get("results")
        records = results if isinstance(results, list) else []
    elif isinstance(payload, list):
        records = payload
    for record in records[:50]:
        if not isinstance(record, dict):
            continue
        parts = [
            f"{key}={record[key]}"
            for key in _DOC_ID_KEYS
            if isinstance(record.get(key), str | int)
            and not isinstance(record.get(key), bool)
            and record.get(key) != ""
        ]
        if parts:
            title = record.get("title")
            suffix = f' "{clip_head_tail(title, 80)}"' if isinstance(title, str) and title else ""
            found.append(" ".join(parts) + suffix)
    return found


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def parse_sections(summary: str) -> dict[str, list[str]]:
    """Bullets per section of a five-section summary (empty dict if it has no sections)."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for raw in summary.splitlines():
        line = raw.strip()
        match = _SECTION_LINE.match(line)
        if match:
            current = match.group(1)
            sections.setdefault(current, [])
        elif current and line.startswith(("- ", "* ")):
            bullet = line[2:].strip()
            if bullet and bullet != "(none found)":
                sections[current].append(bullet)
    return sections


class ExtractiveSummarizer:
    """Offline five-section summary assembled from the transcript's own sentences."""

    name = "extractive"
    extractive = True

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        try:
            sections = self._extract(messages)
        except Exception as exc:
            raise SummarizerFailed(
                f"extractive summarizer failed ({type(exc).__name__}); nothing was written"
            ) from exc
        if previous_summary:
            carried = parse_sections(previous_summary)
            if not carried:
                carried = {"PROGRESS AND DECISIONS": [f"Earlier summary: {previous_summary}"]}
            for section in SECTIONS:
                sections[section] = _dedupe([*carried.get(section, []), *sections[section]])
        if not any(sections.values()):
            raise SummarizerFailed("nothing to summarize: the messages carry no text")
        lines = [EXTRACTIVE_NOTE]
        for section in SECTIONS:
            limit = SECTION_LIMITS[section]
            bullets = sections[section]
            if len(bullets) > limit:  # keep the oldest intent, the newest everything else
                bullets = bullets[:limit] if section == "SESSION INTENT" else bullets[-limit:]
            lines.append("")
            lines.append(f"## {section}")
            if bullets:
                lines.extend(f"- {_bullet(bullet)}" for bullet in bullets)
            else:
                lines.append("- (none found)")
        return "\n".join(lines)

    def _extract(self, messages: Sequence[BaseMessage]) -> dict[str, list[str]]:
        intent: list[str] = []
        requirements: list[str] = []
        decisions: list[str] = []
        next_steps: list[str] = []
        saved_results: list[str] = []
        documents: list[str] = []
        urls: list[str] = []
        files: list[str] = []
        tool_calls: Counter[str] = Counter()
        recent_calls: list[str] = []
        tool_errors: Counter[str] = Counter()
        last_human: str | None = None
        answered_after_last_human = False

        def scan(text: str) -> None:
            urls.extend(URL_PATTERN.findall(text))
            files.extend(match.group(0) for match in _FILE_PATH.finditer(text))

        for message in messages:
            text = message_text(message)
            if isinstance(message, HumanMessage):
                sentences = _sentences(text)
                if sentences and len(intent) < 2:
                    intent.append(sentences[0])
                requirements.extend(s for s in sentences if _REQUIREMENT_CUES.search(s))
                last_human = sentences[0] if sentences else last_human
                answered_after_last_human = False
                scan(text)
            elif isinstance(message, AIMessage):
                sentences = _sentences(text)
                decisions.extend(s for s in sentences if _DECISION_CUES.search(s))
                next_steps.extend(s for s in sentences if _NEXT_CUES.search(s))
                for call in message.tool_calls:
                    name = str(call.get("name") or "tool")
                    args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
                    tool_calls[name] += 1
                    recent_calls.append(f"Called {name}({clip_head_tail(args, 120)})")
                    scan(args)
                if sentences:
                    answered_after_last_human = True
                scan(text)
            elif isinstance(message, ToolMessage):
                saved = parse_saved_result(text)
                if saved is not None and saved.path:
                    saved_results.append(
                        f"{saved.path} ({saved.tool or 'tool'}, sha256 {saved.sha256[:16]})"
                    )
                    documents.extend(_doc_ids(saved.preview))
                    scan(saved.preview)
                else:
                    documents.extend(_doc_ids(text))
                    scan(text)
                if getattr(message, "status", "success") == "error":
                    tool_errors[message.name or "tool"] += 1
            else:
                scan(text)

        progress = list(decisions)
        if tool_calls:
            counts = ", ".join(f"{name} x{count}" for name, count in tool_calls.most_common())
            progress.append(f"Tool calls so far: {counts}")
            progress.extend(recent_calls[-3:])
        progress.extend(
            f"Tool {name} returned an error {count} time(s)" for name, count in tool_errors.items()
        )
        if last_human and not answered_after_last_human:
            next_steps.append(f"Answer the user's latest request: {last_human}")
        saved_paths = {entry.split(" ", 1)[0] for entry in saved_results}
        file_list = _dedupe(f for f in files if f not in saved_paths)
        file_list = [f for f in file_list if not any(o.endswith("/" + f) for o in file_list)]
        per_kind = ARTIFACTS_PER_KIND
        artifacts = [
            *(f"Saved tool result: {entry}" for entry in _dedupe(saved_results)[-per_kind:]),
            *(f"Document: {entry}" for entry in _dedupe(documents)[-per_kind:]),
            *(f"URL: {entry}" for entry in _dedupe(urls)[-per_kind:]),
            *(f"File: {entry}" for entry in file_list[-per_kind:]),
        ]
        return {
            "SESSION INTENT": _dedupe(intent),
            "USER REQUIREMENTS AND PREFERENCES": _dedupe(requirements),
            "PROGRESS AND DECISIONS": _dedupe(progress),
            "ARTIFACTS AND REFERENCES": artifacts,
            "NEXT STEPS": _dedupe(next_steps),
        }


def get_summarizer(settings: Settings) -> Summarizer:
    """The configured OpenAI-compatible summarizer, else the offline extractive one."""
    if settings.summarizer_configured:
        return OpenAICompatibleSummarizer(
            base_url=str(settings.summarizer_base_url),
            model=str(settings.summarizer_model),
            api_key=settings.summarizer_api_key,
            timeout_seconds=settings.summarizer_timeout_seconds,
        )
    return ExtractiveSummarizer()
