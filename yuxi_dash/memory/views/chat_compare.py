"""Chat vs memory: does anything the user wrote support a fact stored about them?

Each fact's key terms (words of three or more letters, minus stopwords and the
user's own name) are looked up in the user's own chat messages (role user /
human). A fact is *supported* when at least half of its key terms occur there.
Facts asserted as the user's (`source_kind = user_asserted`) that nothing the
user wrote supports come first: those are the "I never said that" suspects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_WORD = re.compile(r"[a-z0-9][a-z0-9'_-]{2,}")
USER_ROLES = frozenset({"user", "human"})
STOPWORDS = frozenset(
    """the and for are but not you all any can had her was one our out his has him how its may
    new now old see two who did get got let put say she too use with that this from they been
    have were said each which their will other about many then them these some would make like
    into time very when what your just than only also back after first well even want because
    any most over such through where much before those both being while should does there here
    is a an of to in on at by as it or be user users relates""".split()
)


def words(text: str) -> set[str]:
    return set(_WORD.findall((text or "").lower()))


def key_terms(fact: str, *, exclude: Iterable[str] = ()) -> list[str]:
    skip = STOPWORDS | {w.lower() for w in exclude}
    seen: list[str] = []
    for word in _WORD.findall((fact or "").lower()):
        if word not in skip and word not in seen:
            seen.append(word)
    return seen


def user_words(messages: Sequence[Any]) -> set[str]:
    """Words of the user's own messages (objects or dicts with role and content)."""
    vocabulary: set[str] = set()
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", "")
        content = (
            message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
        )
        if str(role).lower() in USER_ROLES:
            vocabulary |= words(str(content or ""))
    return vocabulary


def compare_facts(
    facts: Sequence[dict[str, Any]], messages: Sequence[Any], *, user_name: str = ""
) -> list[dict[str, Any]]:
    """Facts annotated with key terms, matches and support; suspects first."""
    vocabulary = user_words(messages)
    name_words = words(user_name)
    out = []
    for fact in facts:
        terms = key_terms(fact.get("fact") or "", exclude=name_words)
        found = [t for t in terms if t in vocabulary]
        supported = bool(terms) and len(found) * 2 >= len(terms)
        user_asserted = fact.get("source_kind") == "user_asserted"
        out.append(
            {
                **fact,
                "key_terms": terms,
                "terms_in_chat": found,
                "supported_by_chat": supported,
                "suspect": user_asserted and not supported,
            }
        )
    out.sort(key=lambda f: (not f["suspect"], f["supported_by_chat"], f.get("created_at") or ""))
    return out
