"""`Record`: the one `to_dict()` shared by the plain dataclasses that CLI JSON and pages print."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Record:
    """Mixin for dataclasses whose JSON form is exactly their fields (`dataclasses.asdict`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(cast("DataclassInstance", self))  # every Record is a dataclass
