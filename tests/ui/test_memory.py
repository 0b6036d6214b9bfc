"""The one clearing call after a change of memory (`ui.memory.clear_after_correction`).

Every memory page that keeps reads registers its loaders; a correction, undo, restore or
bulk retract on any page clears them all, so no page shows memory as it was.
"""

from __future__ import annotations

from yuxi_dash.ui import memory, memory_facts
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.memory_review import as_of, assistant_only, retirements


def test_every_memory_page_registers_its_kept_reads() -> None:
    registered = memory._STALE_AFTER_CORRECTION  # noqa: SLF001
    wanted = [memory_facts._fact_list, memory_facts._provenance]  # noqa: SLF001
    wanted += [retirements._retirements]  # noqa: SLF001
    wanted += [assistant_only._share, assistant_only._facts]  # noqa: SLF001
    wanted += list(as_of.LOADERS)
    assert [w for w in wanted if w not in registered] == []


def test_clear_after_correction_clears_a_registered_loader() -> None:
    calls: list[int] = []

    @settings_cached
    def kept(key: int) -> int:
        calls.append(key)
        return len(calls)

    memory.clear_on_correction(kept)
    memory.clear_on_correction(kept)  # once
    assert kept(1) == kept(1) == 1
    memory.clear_after_correction()
    assert kept(1) == 2 and calls == [1, 1]
    assert memory._STALE_AFTER_CORRECTION.count(kept) == 1  # noqa: SLF001
