"""The compression engine: tokens, previews, compaction, summaries, the next model input.

Public names are re-exported here; import them from ``yuxi_dash.compression``.
No Streamlit and no database in this package.
"""

from yuxi_dash.compression.compaction import (
    ARG_TRUNCATION_MARKER,
    SavedResult,
    compact_messages,
    is_saved_result,
    offload_tool_results,
    parse_saved_result,
    saved_result_header,
    truncate_tool_args,
)
from yuxi_dash.compression.cutoff import find_cutoff, safe_cutoff
from yuxi_dash.compression.engine import (
    PreparedSummary,
    auto_compact,
    committed_history,
    count_state_tokens,
    force_summarize,
    model_messages,
    prepare_summary,
    write_summary,
)
from yuxi_dash.compression.estimate import (
    Readiness,
    SummaryEstimate,
    estimate_summary,
    summary_readiness,
)
from yuxi_dash.compression.next_call import (
    BREAKDOWN_PARTS,
    ContextView,
    VisibleMessage,
    context_view,
)
from yuxi_dash.compression.previews.preview import (
    generic_preview,
    structured_preview,
    tool_result_preview,
)
from yuxi_dash.compression.summarizers import (
    SECTIONS,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    Summarizer,
    get_summarizer,
)
from yuxi_dash.compression.thread_state import (
    SAVED_RESULT_MARKER,
    SUMMARY_SOURCE,
    CompressionOutcome,
    SummaryEvent,
    ThreadContextState,
    is_summary_message,
    message_text,
)
from yuxi_dash.compression.token_count import count_tokens

__all__ = [
    "ARG_TRUNCATION_MARKER",
    "BREAKDOWN_PARTS",
    "SAVED_RESULT_MARKER",
    "SECTIONS",
    "SUMMARY_SOURCE",
    "CompressionOutcome",
    "ContextView",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "PreparedSummary",
    "Readiness",
    "SavedResult",
    "Summarizer",
    "SummaryEstimate",
    "SummaryEvent",
    "VisibleMessage",
    "ThreadContextState",
    "auto_compact",
    "committed_history",
    "compact_messages",
    "context_view",
    "count_state_tokens",
    "count_tokens",
    "estimate_summary",
    "find_cutoff",
    "force_summarize",
    "generic_preview",
    "get_summarizer",
    "is_saved_result",
    "is_summary_message",
    "message_text",
    "model_messages",
    "offload_tool_results",
    "parse_saved_result",
    "prepare_summary",
    "safe_cutoff",
    "saved_result_header",
    "structured_preview",
    "summary_readiness",
    "tool_result_preview",
    "truncate_tool_args",
    "write_summary",
]
