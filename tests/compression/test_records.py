"""Reading only what a preview shows (compression.records, clipping.RawBody).

The preview made from the bytes (fields read, bodies decoded as far as shown)
must be exactly the one the full decode of the text gives.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bench.corpus import build_corpus
from tests.fixtures.profiles import examples
from yuxi_dash.compression.clipping import RawBody, _cut_after, _cut_before, clip_head_tail
from yuxi_dash.compression.compaction import tool_result_text
from yuxi_dash.compression.preview import structured_preview
from yuxi_dash.compression.records import read_records


def _read(literal: bytes) -> str:
    text = json.loads(literal.decode("utf-8", "surrogatepass"))
    assert isinstance(text, str)
    return text


def _both(tool: str, text: str, token_limit: int, rule: str) -> tuple[str | None, str | None]:
    encoded = text.encode("utf-8", "surrogatepass")
    from_bytes = structured_preview(tool, text, token_limit, rule=rule, encoded=encoded)  # type: ignore[arg-type]
    from_text = structured_preview(tool, text, token_limit, rule=rule)  # type: ignore[arg-type]
    return from_bytes, from_text


def test_the_corpus_previews_are_the_full_decodes_at_three_budgets() -> None:
    compared = read = 0
    for scale, seed in ((1, 12), (1, 29), (3, 12)):
        for thread in build_corpus(scale=scale, seed=seed):
            for message in thread.results:
                text = tool_result_text(message)
                if text is None or len(text) <= 1200:
                    continue
                encoded = text.encode("utf-8", "surrogatepass")
                read += read_records(encoded, 1202) is not None
                for token_limit in (60, 300, 1000):
                    for rule in ("compact", "plain"):
                        from_bytes, from_text = _both(message.name or "", text, token_limit, rule)
                        assert from_bytes == from_text, (thread.shape, token_limit, rule)
                        compared += 1
    assert compared > 5000
    assert read > 600  # most results go the new way, not the fallback


# -- hostile and odd bodies ---------------------------------------------------------
_PIECES = st.sampled_from(
    [
        "文档内容",
        "abc ",
        "\n",
        "\t",
        '"',
        "\\",
        "\u3000",
        "\u00a0",
        "e\u0301",  # a combining mark
        "\u200d",  # zero width joiner
        "👍🏽",  # skin tone modifier
        "👨\u200d👩\u200d👧",
        "🇫🇷🇩🇪",  # flags: regional indicator pairs
        "🇫",
        "\ufe0f",
        "\x01",
        "한국어",
        "😀",
        "\u2028",
        "\ud800",  # lone surrogates: msgspec refuses them, json reads them
        "\udc00",
    ]
)
_BODIES = st.one_of(
    st.lists(_PIECES, max_size=400).map("".join),
    st.tuples(_PIECES, st.integers(1, 300)).map(lambda p: p[0] * p[1]),
    st.text(max_size=300),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(
    bodies=st.lists(
        st.tuples(st.sampled_from(["content", "text", "snippet"]), _BODIES), max_size=12
    ),
    token_limit=st.sampled_from([8, 20, 60, 300]),
    ensure_ascii=st.booleans(),
    rule=st.sampled_from(["compact", "plain"]),
    bare=st.booleans(),
)
def test_any_bodies_preview_as_the_full_decode(
    bodies: list[tuple[str, Any]], token_limit: int, ensure_ascii: bool, rule: str, bare: bool
) -> None:
    records = [
        {"id": f"doc-{i}", "score": 0.5 + i / 100, "title": f"t{i}", key: body}
        for i, (key, body) in enumerate(bodies)
    ]
    payload: Any = records if bare else {"query": "q", "results": records, "extra": {"x": [1]}}
    text = json.dumps(payload, ensure_ascii=ensure_ascii)
    from_bytes, from_text = _both("query_kb", text, token_limit, rule)  # lone surrogates too
    assert from_bytes == from_text


@settings(max_examples=examples(300))
@given(text=st.lists(_PIECES, min_size=1, max_size=60).map("".join), ensure_ascii=st.booleans())
def test_a_cut_never_lands_inside_a_character_or_an_escape(text: str, ensure_ascii: bool) -> None:
    # a lone surrogate escaped (\\ud800) is refused before any cut: msgspec checks escapes
    assume(not (ensure_ascii and any("\ud800" <= char <= "\udfff" for char in text)))
    literal = json.dumps(text, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    whole = _read(literal)
    inner = literal[1:-1]
    for index in range(len(inner) + 1):
        head = _read(b'"' + inner[: _cut_before(inner, index)] + b'"')
        tail = _read(b'"' + inner[_cut_after(inner, index) :] + b'"')
        assert whole.startswith(head) and whole.endswith(tail)
        assert len(head) + len(tail) in (len(whole), len(whole) - 1)  # at most one char between


@settings(max_examples=examples(200))
@given(
    text=st.lists(_PIECES, min_size=1, max_size=800).map("".join),
    window=st.integers(10, 80),
    ensure_ascii=st.booleans(),
)
def test_a_raw_body_clips_as_its_text_does(text: str, window: int, ensure_ascii: bool) -> None:
    literal = json.dumps(text, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    text = _read(literal)
    body = RawBody(literal, window)
    assert body.is_blank() == (not text or text.isspace())
    if body.chars() <= window:
        assert body.chars() == len(text)
    else:
        assert len(text) > window
    for allowance in range(0, window - 1):
        assert body.clip(allowance) == clip_head_tail(text, allowance), allowance


def test_a_long_body_is_decoded_at_its_ends_only() -> None:
    text = "前" * 5000 + "中间" * 5000 + "后" * 5000
    body = RawBody(json.dumps(text, ensure_ascii=False).encode(), 100)
    assert body.clip(50) == clip_head_tail(text, 50)
    assert body.text is None and len(body.starts) < 200 and len(body.ends) < 200
    assert body.chars() > 100


def test_what_read_records_leaves_to_the_full_decode() -> None:
    def read(payload: Any, *, ascii_only: bool = True) -> Any:
        return read_records(json.dumps(payload, ensure_ascii=ascii_only).encode(), 102)

    assert read({"code": 0, "data": {"results": [{"id": "a"}]}}) is None  # an envelope
    assert read({"results": [{"id": "a"}, "b"]}) is None  # a record that is not an object
    assert read({"results": {"id": "a"}}) is None
    assert read({"query": "q"}) is None
    assert read_records(b'{"results": [{"id": NaN}]}', 102) is None
    lone = '{"results": [{"id": "a\ud800", "content": "x"}]}'.encode("utf-8", "surrogatepass")
    assert read_records(lone, 102) is None  # a kept field msgspec refuses
    records, count, header = read(
        {"query": "q", "kb_id": "k", "results": [{"id": str(i), "other": 1} for i in range(12)]}
    )
    assert count == 12 and len(records) == 8
    assert records[0] == {"id": "0"} and header == {"query": "q", "kb_id": "k"}


def test_a_long_body_ending_in_a_flag_run_is_cut_as_its_text_is() -> None:
    for run in (400, 401):  # the tail's cut depends on the parity of the whole run
        text = "x" * 2000 + "\U0001f1eb" * run
        body = RawBody(json.dumps(text, ensure_ascii=False).encode(), 50)
        for allowance in range(48):
            assert body.clip(allowance) == clip_head_tail(text, allowance), (run, allowance)


def test_a_number_past_pythons_digit_limit_is_no_reason_to_salvage() -> None:
    huge = "1" * 4301  # json.loads refuses it (sys.get_int_max_str_digits); msgspec skips it
    skipped = '{"results":[{"id":"a","score":1,"x":' + huge + ',"content":"hello"}]}'
    from_bytes, from_text = _both("query_kb", skipped, 50, "compact")
    assert from_text is None  # json refuses the text; what precedes the number is no record
    assert from_bytes is not None and '"salvaged"' not in from_bytes
    assert '"result_count":1' in from_bytes and '"id":"a"' in from_bytes
    as_body = '{"results":[{"id":"a","score":1,"content":' + huge + "}]}"
    assert read_records(as_body.encode(), 202) is None  # read: the whole decode decides
    from_bytes, from_text = _both("query_kb", as_body, 50, "compact")
    assert from_bytes == from_text


# -- an envelope one level down (the compact rule looks there) -----------------------------
_MEMBER_VALUES = st.one_of(
    st.integers(),
    st.text(max_size=5),
    st.just({}),
    st.fixed_dictionaries({"query": st.text(max_size=5)}),  # an object without results
    st.fixed_dictionaries(  # results that are not a list of objects
        {"results": st.one_of(st.none(), st.just("x"), st.just([{"id": "a"}, 3]))}
    ),
    st.fixed_dictionaries(
        {
            "query": st.text(max_size=5),
            "kb_id": st.text(max_size=5),
            "results": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(min_size=1, max_size=8), "score": st.floats(0, 1)},
                    optional={"content": st.text(max_size=80), "title": st.text(max_size=20)},
                ),
                max_size=10,
            ),
        }
    ),
)


@settings(max_examples=examples(300))
@given(
    st.lists(
        st.tuples(st.sampled_from(["code", "data", "payload", "x"]), _MEMBER_VALUES), max_size=4
    ),
    st.booleans(),
)
def test_an_envelope_one_level_down_is_read_as_the_full_decode_finds_it(
    members: list[tuple[str, Any]], ascii_only: bool
) -> None:
    """Members in document order, a repeated key where it first appears with its last
    value (written out by hand: a dict cannot repeat a key), the first object holding a
    list of results, as ``preview._locate_records`` reads the decoded document."""
    text = (
        "{"
        + ", ".join(
            f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=ascii_only)}"
            for key, value in members
        )
        + "}"
    )
    for rule in ("compact", "plain"):
        from_bytes, from_text = _both("query_kb", text, 100, rule)
        assert from_bytes == from_text, rule


def test_an_envelope_is_read_one_level_down_only_when_asked() -> None:
    envelope = json.dumps(
        {"code": 0, "meta": {"query": "no"}, "data": {"query": "q", "results": [{"id": "a"}]}}
    ).encode()
    assert read_records(envelope, 102) is None  # the plain rule does not look there
    records, count, header = read_records(envelope, 102, nested=True) or ([], 0, {})
    assert records == [{"id": "a"}] and count == 1 and header == {"query": "q"}
