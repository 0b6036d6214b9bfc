"""The graph itself: group ids, the embedded FalkorDB server, the read-only client,
the Cypher of every view, fact statuses and correction rules,
the fact writes and the index health check.
"""
