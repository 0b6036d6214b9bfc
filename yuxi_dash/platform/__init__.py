"""Acting on an attached platform's threads through the platform's own HTTP endpoint.

- `client`: the HTTP client on ``POST /api/chat/thread/{id}/compress`` and its typed outcomes.
- `compress`: one attached thread compressed there, audited per attempt, projected again.
- `capability`: which attached threads may be sent (the URL set, the agent not refused).
- `bulk`: several threads compressed through the one seam, at most 3 platform calls at once.
"""
