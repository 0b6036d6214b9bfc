"""yuxi-dash: operator console over context compression and Graphiti memory."""
