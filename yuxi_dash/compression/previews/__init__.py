"""The preview a saved tool result leaves in the thread: the generic head/tail one,
whole citations of query_kb and web_search records, salvage of cut JSON.
"""
