"""`st.cache_data` with the configured TTL, decided when a loader first runs, not at import.

A loader decorated with `settings_cached` reads `settings.cache_ttl_seconds` on
each call and wraps the function with `st.cache_data` for that TTL on first use,
so importing the loader modules reads no environment and no `.env` file. The
cache key and the unhashed `_`-prefixed parameters are Streamlit's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

import streamlit as st

from yuxi_dash.settings import get_settings

P = ParamSpec("P")
R = TypeVar("R")


class SettingsCached(Generic[P, R]):
    """A cached loader whose TTL is `settings.cache_ttl_seconds` at the time of the call."""

    def __init__(self, load: Callable[P, R]) -> None:
        self._load = load
        self._by_ttl: dict[int, Any] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, load)

    def _cached(self) -> Any:
        ttl = get_settings().cache_ttl_seconds
        with self._lock:
            cached = self._by_ttl.get(ttl)
            if cached is None:
                cached = self._by_ttl[ttl] = st.cache_data(ttl=ttl, show_spinner=False)(self._load)
            return cached

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._cached()(*args, **kwargs)
        return result

    def clear(self) -> None:
        """Forget every cached result of this loader."""
        with self._lock:
            cached = list(self._by_ttl.values())
        for each in cached:
            each.clear()


def settings_cached(load: Callable[P, R]) -> SettingsCached[P, R]:
    """Decorate a loader: `st.cache_data(ttl=settings.cache_ttl_seconds, show_spinner=False)`."""
    return SettingsCached(load)
