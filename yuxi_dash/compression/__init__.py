"""The compression engine (DESIGN §3–4): tokens, previews, compaction, summaries.

Public names are re-exported here; import them from ``yuxi_dash.compression``.
No Streamlit and no database in this package.
"""

from yuxi_dash.compression.compaction import (
    ARG_TRUNCATION_MARKER,
    compact_messages,
    is_saved_result,
    offload_tool_results,
    parse_saved_header,
    saved_result_header,
    truncate_tool_args,
)
from yuxi_dash.compression.cutoff import find_cutoff, safe_cutoff
from yuxi_dash.compression.engine import (
    auto_compact,
    count_state_tokens,
    force_summarize,
    model_view,
)
from yuxi_dash.compression.preview import (
    generic_preview,
    structured_preview,
    tool_result_preview,
)
from yuxi_dash.compression.state import (
    SAVED_RESULT_MARKER,
    SUMMARY_SOURCE,
    CompressionOutcome,
    SummaryEvent,
    ThreadContextState,
    is_summary_message,
    message_text,
)
from yuxi_dash.compression.summarizers import (
    SECTIONS,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    Summarizer,
    get_summarizer,
)
from yuxi_dash.compression.tokens import count_tokens

__all__ = [
    "ARG_TRUNCATION_MARKER",
    "SAVED_RESULT_MARKER",
    "SECTIONS",
    "SUMMARY_SOURCE",
    "CompressionOutcome",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "Summarizer",
    "SummaryEvent",
    "ThreadContextState",
    "auto_compact",
    "compact_messages",
    "count_state_tokens",
    "count_tokens",
    "find_cutoff",
    "force_summarize",
    "generic_preview",
    "get_summarizer",
    "is_saved_result",
    "is_summary_message",
    "message_text",
    "model_view",
    "offload_tool_results",
    "parse_saved_header",
    "safe_cutoff",
    "saved_result_header",
    "structured_preview",
    "tool_result_preview",
    "truncate_tool_args",
]
