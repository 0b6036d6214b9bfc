"""`Record`: the one `to_dict()` shared by the plain dataclasses that CLI JSON and pages print."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


class Record:
    """Mixin for dataclasses whose JSON form is exactly their fields (`dataclasses.asdict`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]
