"""The mypyc-compiled preview build: which build runs, and that it makes the pure build's previews.

The README's test command runs the editable tree, which must be pure Python (a
stale extension module there would shadow every edit). CI then builds the
wheel with the compiled modules and runs the preview tests against it with
``YUXI_DASH_EXPECT_PREVIEW_BUILD=compiled`` (see README, "The compiled
preview"); there the corpus test compares two different builds.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec

from bench.corpus import build_corpus
from yuxi_dash.compression.compaction import tool_result_text
from yuxi_dash.compression.compiled import PREVIEW_MODULES, is_compiled, preview_build
from yuxi_dash.compression.preview import structured_preview, tool_result_preview

ROOT = Path(__file__).resolve().parents[2]
TOKEN_LIMIT = 300  # the bench's budget: 1,200 characters per preview


def test_the_preview_build_is_the_one_under_test() -> None:
    expected = os.environ.get("YUXI_DASH_EXPECT_PREVIEW_BUILD", "pure Python")
    files = {module.__name__: module.__file__ for module in PREVIEW_MODULES}
    assert preview_build() == expected, files


def test_setup_compiles_exactly_the_preview_modules() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    listed = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "COMPILED_MODULES" for t in node.targets)
    )
    ours = [module.__name__.replace(".", "/") + ".py" for module in PREVIEW_MODULES]
    assert sorted(listed) == sorted(ours)


def test_is_compiled_tells_an_extension_module_from_a_source_one() -> None:
    assert not is_compiled(ast)
    assert is_compiled(msgspec._core)


# Runs in a child process: the preview modules are loaded from their .py files
# even where compiled ones sit beside them, then every corpus result's preview
# digest is printed as JSON.
_PURE_PREVIEWS = """
import hashlib, importlib.util, json, os, sys

PURE = {names!r}

class PureSource:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in PURE:
            return None
        for entry in path or []:
            source = os.path.join(entry, name.rpartition(".")[2] + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(name, source)
        raise ImportError(f"no source for {{name}}")

sys.meta_path.insert(0, PureSource)
from yuxi_dash.compression.compiled import preview_build
assert preview_build() == "pure Python", preview_build()
sys.path.insert(0, {root!r})
from tests.compression.test_compiled import corpus_previews
print(json.dumps(corpus_previews()))
"""


def corpus_previews() -> list[list[str]]:
    """(shape, tool, rule, outcome) for each result of the corpus at 1× (two seeds) and 3×.

    The outcome is the sha256 of ``structured_preview`` (or the name of what it
    raised: ``tool_result_preview`` would hide a compiled module's TypeError behind
    its generic fallback) and of ``tool_result_preview``. Both rules, and both
    decodes (from the text, and from its UTF-8 bytes as the engine does).
    """
    rows = []
    for scale, seed in ((1, 12), (1, 29), (3, 12)):
        for thread in build_corpus(scale=scale, seed=seed):
            for message in thread.results:
                text = tool_result_text(message)
                if text is None or len(text) <= TOKEN_LIMIT * 4:
                    continue
                encoded = text.encode("utf-8", "surrogatepass")
                name = message.name or ""
                for rule, data in (("compact", encoded), ("compact", None), ("plain", encoded)):
                    try:
                        structured = _digest(
                            structured_preview(name, text, TOKEN_LIMIT, rule=rule, encoded=data)
                        )
                    except Exception as exc:  # noqa: BLE001 - the outcome compared is what raised
                        structured = f"raised {type(exc).__name__}"
                    preview = tool_result_preview(name, text, TOKEN_LIMIT, rule=rule, encoded=data)
                    outcome = f"{structured} {_digest(preview)}"
                    rows.append([f"{thread.shape}@{scale}x/{seed}", name, rule, outcome])
    return rows


def _digest(preview: str | None) -> str:
    if preview is None:
        return "none"
    return hashlib.sha256(preview.encode("utf-8", "surrogatepass")).hexdigest()


def test_previews_are_the_pure_sources_previews_on_the_whole_corpus() -> None:
    ours = corpus_previews()
    script = _PURE_PREVIEWS.format(
        names=sorted(module.__name__ for module in PREVIEW_MODULES), root=str(ROOT)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pure = json.loads(done.stdout)
    assert len(ours) == len(pure) > 2000
    assert not any("raised" in row[3] for row in ours), [r for r in ours if "raised" in r[3]][:3]
    differ = [o[:3] for o, p in zip(ours, pure, strict=True) if o != p]
    assert not differ, f"{len(differ)} previews differ from the pure build's, first: {differ[:5]}"
