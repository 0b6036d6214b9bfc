"""Acting on an attached platform's threads through the platform's own HTTP endpoint.

- `client`: the HTTP client on ``POST /api/chat/thread/{id}/compress`` and its typed outcomes.
- `compress`: one attached thread compressed there, audited per attempt, projected again.

Which threads go there, and which the platform refused before, is `yuxi_dash.store.origin`;
`yuxi_dash.sources` sends them (several at once: at most 3 calls in flight).
"""
