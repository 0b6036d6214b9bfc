"""User id -> Graphiti group id (= the user's FalkorDB graph name).

`derive_group_id` is the only way a user id becomes a graph name. It refuses,
rather than silently rewrites, any id that is empty, carries characters
outside ``[A-Za-z0-9_-]`` or is longer than 128 characters, so two users can
never collide on one graph and no Cypher or path characters reach the server.
"""

from __future__ import annotations

import re

GROUP_PREFIX = "user_"
MAX_USER_ID_LENGTH = 128
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def derive_group_id(user_id: str) -> str:
    """Return ``user_<user_id>``; ValueError if sanitising the id would change it."""
    if not isinstance(user_id, str) or not user_id:
        raise ValueError("user id must be a non-empty string")
    stripped = _DISALLOWED.sub("", user_id)
    if stripped != user_id:
        raise ValueError("user id may only contain letters, digits, '_' and '-'")
    if len(stripped[:MAX_USER_ID_LENGTH]) != len(user_id):
        raise ValueError(f"user id is longer than {MAX_USER_ID_LENGTH} characters")
    return GROUP_PREFIX + user_id


def user_id_from_group(group_id: str) -> str | None:
    """The user id of a graph name made by `derive_group_id`, or None for other graphs."""
    if not group_id.startswith(GROUP_PREFIX):
        return None
    user_id = group_id[len(GROUP_PREFIX) :]
    try:
        derive_group_id(user_id)
    except ValueError:
        return None
    return user_id
