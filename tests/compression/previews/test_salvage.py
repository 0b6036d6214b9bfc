"""Salvaged records: cut JSON, trailing text and Python reprs get an evidence-first preview."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compression.builders import kb_payload
from tests.fixtures.profiles import examples
from yuxi_dash.compression import generic_preview, structured_preview, tool_result_preview
from yuxi_dash.compression.previews.preview import preview_salvage
from yuxi_dash.compression.previews.salvage import (
    _REPR_WORDS,
    MAX_LITERAL_ITEMS,
    MAX_SALVAGED_ITEMS,
    _json_word,
    parse_records_text,
)

LIMIT = 600  # budget 2,400 chars: room for 8 whole records of kb_payload


def _ids(preview: str) -> list[str]:
    return [record["id"] for record in json.loads(preview)["results"]]


def _cut_inside_record(text: str, record: int) -> str:
    """``text`` cut in the middle of record ``record``'s body (0-based)."""
    at = text.index(f"Body of chunk {record}.")
    return text[: at + 30]


@pytest.mark.parametrize("complete", [1, 3, 6])
def test_json_cut_mid_record_keeps_the_complete_records_before_the_cut(complete: int) -> None:
    text = _cut_inside_record(kb_payload(10), complete)
    preview = tool_result_preview("query_kb", text, LIMIT)
    document = json.loads(preview)
    assert document["kind"] == "knowledge_base" and document["salvaged"] == "cut"
    assert document["result_count"] == complete
    assert document["query"] == "retention policy" and document["kb_id"] == "kb-main"
    assert _ids(preview) == [f"chunk-{n}" for n in range(complete)]
    assert len(preview) <= LIMIT * 4


def test_trailing_text_after_the_json_is_salvaged_whole() -> None:
    text = kb_payload(30) + "\n\n[results truncated by the search service: 12 more]"
    preview = tool_result_preview("query_kb", text, LIMIT)
    document = json.loads(preview)
    assert document["salvaged"] == "trailing_text" and document["result_count"] == 30
    shown = _ids(preview)
    assert 8 <= len(shown) < 30 and shown == [f"chunk-{n}" for n in range(len(shown))]
    assert document["omitted_results"] == 30 - len(shown)


def test_a_python_repr_of_the_result_is_read_as_literals() -> None:
    payload = json.loads(kb_payload(5))
    payload["results"][0]["title"] = 'it\'s "quoted" 中文'
    preview = tool_result_preview("query_kb", repr(payload), LIMIT)
    document = json.loads(preview)
    assert document["salvaged"] == "python_repr" and document["result_count"] == 5
    assert _ids(preview) == [f"chunk-{n}" for n in range(5)]
    assert document["results"][0]["title"] == 'it\'s "quoted" 中文'


def test_a_cut_envelope_and_a_cut_bare_list_are_found() -> None:
    records = json.loads(kb_payload(6))["results"]
    envelope = json.dumps({"code": 0, "data": {"query": "q", "results": records}})
    preview = tool_result_preview("query_kb", _cut_inside_record(envelope, 4), LIMIT)
    assert json.loads(preview)["salvaged"] == "cut" and _ids(preview) == [
        f"chunk-{n}" for n in range(4)
    ]
    bare = _cut_inside_record(json.dumps(records), 2)
    assert _ids(tool_result_preview("query_kb", bare, LIMIT)) == ["chunk-0", "chunk-1"]


def test_valid_json_is_not_marked_and_whitespace_after_it_is_not_trailing_text() -> None:
    text = kb_payload(4)
    assert parse_records_text(text) == (json.loads(text), None)
    assert parse_records_text(text + " \n\t") == (json.loads(text), None)
    assert '"salvaged"' not in tool_result_preview("query_kb", text + "\n", LIMIT)


@pytest.mark.parametrize(
    "text",
    [
        _cut_inside_record(kb_payload(10), 0),  # not one complete record
        '{"query": "q", "results": [' + " " * 3000,
        "{'query': 'q', 'results': [{'id': 'a', " + "x" * 3000,  # cut in the first record
    ],
)
def test_nothing_complete_falls_back_to_the_generic_preview(text: str) -> None:
    assert structured_preview("query_kb", text, LIMIT) is None
    assert tool_result_preview("query_kb", text + "." * 3000, LIMIT).startswith("[HEAD]\n")


def test_a_repr_is_never_executed() -> None:
    for text in (
        "[{'id': __import__('os').getcwd()}]" + " " * 2000,
        "[{'id': (lambda: 1)()}]" + " " * 2000,
        "[{'id': 'a' * 10**9}]" + " " * 2000,
    ):
        assert parse_records_text(text) is None
        assert tool_result_preview("query_kb", text + " " * 2400, LIMIT).startswith("[HEAD]\n")


_HOSTILE = {
    "deep JSON list": "[" * 200_000,
    "deep JSON list, closed": "[" * 100_000 + "]" * 100_000,
    "deep JSON object, cut": '{"a":' * 100_000,
    "deep cut inside a record": '{"results":[{"id":"a","score":1},{"x":' + "[" * 100_000,
    "deep repr": "[{'id': " + "[" * 100_000 + "]" * 100_000 + "}]",
    "long unary chain in a repr": "[{'id': 'a', 'score': " + "-" * 200_000 + "1}]",
    "huge string, cut": '{"results":[{"id":"x","score":1,"content":"' + "a" * 4_000_000,
    "huge string in a repr": "[{'id': 'x', 'score': 1, 'content': '" + "é" * 900_000 + "'}]",
    "huge integer": '{"results":[{"id":"a","score":1},{"id":"b","score":' + "9" * 10_000 + "}]}",
    "many tiny items in a repr": "[" + "{'id': 'x'}," * (MAX_LITERAL_ITEMS + 1) + "]",
    "many tiny records, cut": "[" + '{"id":"x","score":1},' * 200_000,
}


@pytest.mark.parametrize("name", list(_HOSTILE))
def test_hostile_inputs_never_raise_and_stay_in_budget_and_bounded(name: str) -> None:
    text = _HOSTILE[name]
    started = time.process_time()
    parse_records_text(text)
    preview = tool_result_preview("query_kb", text, LIMIT)
    took = time.process_time() - started
    structured = structured_preview("query_kb", text, LIMIT)
    if structured is not None:
        assert structured == preview and len(preview) <= LIMIT * 4
        json.loads(preview)
    else:
        assert preview.startswith("[HEAD]\n")
    # bounded work: a few linear reads, never a parse tree of a huge repr (not a speed
    # assertion: an order of magnitude above what it takes, to catch a blow-up)
    assert took < 5.0, took


@settings(max_examples=examples(150))
@given(st.integers(min_value=1, max_value=10), st.data())
def test_any_prefix_of_a_result_shows_only_complete_records_in_order(
    count: int, data: st.DataObject
) -> None:
    """A result cut anywhere: never raises, within budget, and every record shown is one of
    the original's complete records, in order, whole ids."""
    text = kb_payload(count)
    cut = data.draw(st.integers(min_value=1, max_value=len(text)))
    prefix = text[:cut]
    preview = tool_result_preview("query_kb", prefix, LIMIT)
    structured = structured_preview("query_kb", prefix, LIMIT)
    if structured is None:
        return
    assert structured == preview and len(preview) <= LIMIT * 4
    document = json.loads(preview)
    complete = document["result_count"]
    whole = json.dumps(json.loads(text)["results"][complete - 1]) if complete else ""
    assert complete == count or document.get("salvaged") == "cut"
    assert not complete or whole in prefix  # the last counted record is whole in the text
    assert _ids(preview) == [f"chunk-{n}" for n in range(len(document["results"]))]


def test_a_repr_past_the_item_bound_is_not_parsed() -> None:
    """A repr that needs ``ast.literal_eval`` (here: strings holding a double quote) costs
    its parse tree, not its length: past ``MAX_LITERAL_ITEMS`` separators it is left to
    the generic preview."""
    under = "[" + "{'id': 'x\"'}," * (MAX_LITERAL_ITEMS // 2 - 1) + "]"
    over = "[" + "{'id': 'x\"'}," * (MAX_LITERAL_ITEMS // 2 + 1) + "]"
    parsed = parse_records_text(under)
    assert parsed is not None and parsed[1] == "python_repr"
    assert parsed[0][0] == {"id": 'x"'}
    assert parse_records_text(over) is None


def test_a_cut_python_repr_keeps_its_complete_records() -> None:
    payload = json.loads(kb_payload(10))
    text = repr(payload)
    cut = text[: text.index("Body of chunk 4.") + 25]
    preview = tool_result_preview("query_kb", cut, LIMIT)
    document = json.loads(preview)
    assert document["salvaged"] == "python_repr_cut" and document["result_count"] == 4
    assert _ids(preview) == ["chunk-0", "chunk-1", "chunk-2", "chunk-3"]


_LITERALS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["True", "None (x)", "nan inf", "it's", 'a "q"', "back\\slash", "#"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(300))
@given(st.lists(st.dictionaries(st.text(max_size=6), _LITERALS, max_size=5), max_size=6))
def test_a_repr_reads_as_literal_eval_reads_it(records: list) -> None:
    """The string-operation reading of a plain repr gives what ``ast.literal_eval`` gives
    (tuples as lists); any repr it cannot read plainly goes to ``literal_eval`` itself."""
    import ast

    text = repr(records)
    expected = json.loads(json.dumps(ast.literal_eval(text)))  # tuples become lists
    parsed = parse_records_text(text) if text.startswith("[{") else None
    if parsed is None:
        return  # not a list of records (or a bare [] / [{}] JSON reads itself)
    value, how = parsed
    assert how in (None, "python_repr")
    try:
        assert json.loads(json.dumps(value)) == expected
    except ValueError:  # integer keys: compare as Python values
        assert value == ast.literal_eval(text) or value == expected


def test_a_cut_list_is_read_up_to_the_item_cap() -> None:
    text = "[" + '{"id":"x","score":1},' * (MAX_SALVAGED_ITEMS + 50)
    parsed = parse_records_text(text)
    assert parsed is not None and parsed[1] == "cut" and len(parsed[0]) == MAX_SALVAGED_ITEMS


def test_a_cut_object_is_read_up_to_the_pair_cap() -> None:
    """A hostile cut object of many small pairs stops at the cap, as a cut list does."""
    pairs = ",".join(f'"k{i}":{i}' for i in range(MAX_SALVAGED_ITEMS * 20))
    parsed = parse_records_text('{"results":[{"id":"a","score":1}],' + pairs)
    assert parsed is not None and parsed[1] == "cut"
    value = parsed[0]
    assert len(value) == MAX_SALVAGED_ITEMS  # "results" and the first 999 pairs
    assert value["results"] == [{"id": "a", "score": 1}]
    assert value[f"k{MAX_SALVAGED_ITEMS - 2}"] == MAX_SALVAGED_ITEMS - 2
    assert f"k{MAX_SALVAGED_ITEMS - 1}" not in value


def test_preview_salvage_reports_only_a_salvaged_structured_preview() -> None:
    text = kb_payload(10)
    cut = _cut_inside_record(text, 3)
    preview = tool_result_preview("query_kb", cut, LIMIT)
    assert preview_salvage(preview, cut) == "cut"
    whole = tool_result_preview("query_kb", text, LIMIT)
    assert preview_salvage(whole, text) is None
    # a short result that only looks like a salvaged preview is shown as itself: not salvaged
    forged = '{"kind":"knowledge_base","salvaged":"cut","result_count":1,"results":[]}'
    assert preview_salvage(tool_result_preview("query_kb", forged, LIMIT), forged) is None
    assert preview_salvage(generic_preview("x" * 5000, LIMIT), "x" * 5000) is None


@pytest.mark.parametrize(
    "records",
    [[{}, {"": {0: None}}], [{}, {"'": None}], [{"id": "a", "n": {1, 2}}]],
    ids=["integer_key", "first_quote_double", "set_value"],
)
def test_a_whole_repr_beyond_json_is_read_whole_not_as_cut(records: list) -> None:
    """Whole reprs that are not JSON once converted (an integer key, a set) or whose first
    quote is ``"``: read by ``literal_eval``, never shown as cut after the first record."""
    import ast

    parsed = parse_records_text(repr(records))
    assert parsed is not None and parsed[1] == "python_repr"
    assert parsed[0] == ast.literal_eval(repr(records))


# -- reading cut text once ---------------------------------------------------------------
def _salvage_by_definition(text: str, pos: int, depth: int) -> object:
    """What a salvage keeps of the container at ``pos``, by its definition and with ``json``
    alone: each value read whole where ``json`` can; where it cannot, an object's value
    that is a container is kept as far as it is complete while ``depth`` allows, and the
    reading stops."""
    decode = json.JSONDecoder().raw_decode
    skip = re.compile(r"[ \t\n\r]*")
    if text[pos] == "[":
        items: list[object] = []
        pos = skip.match(text, pos + 1).end()  # type: ignore[union-attr]
        while not text.startswith("]", pos):
            try:
                item, pos = decode(text, pos)
            except ValueError:
                return items
            items.append(item)
            pos = skip.match(text, pos).end()  # type: ignore[union-attr]
            if not text.startswith(",", pos):
                return items
            pos = skip.match(text, pos + 1).end()  # type: ignore[union-attr]
        return items
    obj: dict[str, object] = {}
    pos = skip.match(text, pos + 1).end()  # type: ignore[union-attr]
    while text.startswith('"', pos):
        try:
            key, pos = decode(text, pos)
            pos = skip.match(text, pos).end()  # type: ignore[union-attr]
            if not text.startswith(":", pos):
                return obj
            pos = skip.match(text, pos + 1).end()  # type: ignore[union-attr]
            value, pos = decode(text, pos)
        except ValueError:
            if depth > 1 and text[pos : pos + 1] in ("{", "["):
                inner = _salvage_by_definition(text, pos, depth - 1)
                if inner:
                    obj[key] = inner
            return obj
        obj[key] = value
        pos = skip.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(",", pos):
            return obj
        pos = skip.match(text, pos + 1).end()  # type: ignore[union-attr]
    return obj


_RECORD_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_DOCUMENTS = st.fixed_dictionaries(
    {
        "query": st.text(max_size=10),
        "results": st.lists(
            st.dictionaries(st.text(max_size=5), _RECORD_VALUES, max_size=4), max_size=5
        ),
    },
    optional={"meta": st.dictionaries(st.text(max_size=4), _RECORD_VALUES, max_size=3)},
)


@settings(max_examples=examples(300))
@given(
    st.one_of(
        _DOCUMENTS,
        st.fixed_dictionaries({"code": st.integers(), "data": _DOCUMENTS}),
        st.lists(_RECORD_VALUES, max_size=5),
    ),
    st.sampled_from([None, (",", ":"), (" , ", " :\n ")]),
    st.booleans(),
    st.data(),
)
def test_a_cut_document_keeps_exactly_what_is_complete_before_the_cut(
    document: object, separators: tuple[str, str] | None, ascii_only: bool, data: st.DataObject
) -> None:
    """Read once, container by container: the salvage of any prefix is the salvage by
    definition (``json`` on each value), nested envelopes included."""
    text = json.dumps(document, separators=separators, ensure_ascii=ascii_only)
    cut = data.draw(st.integers(min_value=1, max_value=len(text) - 1))
    prefix = text[:cut]
    parsed = parse_records_text(prefix)
    expected = _salvage_by_definition(prefix, 0, 3)
    if parsed is None or parsed[1] != "cut":  # nothing complete yet, or still whole JSON
        assert not expected or parsed is not None and parsed[0] == json.loads(prefix)
    else:
        assert parsed[0] == expected


@settings(max_examples=examples(300))
@given(
    st.one_of(_DOCUMENTS, st.lists(_RECORD_VALUES, max_size=5)),
    st.booleans(),
    st.sampled_from([" note", "\n\n[12 more]x", "\u3000"]),
)
def test_a_document_followed_by_text_is_the_document_json_reads(
    document: object, ascii_only: bool, tail: str
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only)
    assert parse_records_text(text + tail) == (json.loads(text), "trailing_text")


def test_a_cut_value_past_the_cap_is_read_whole_when_it_closes() -> None:
    """A nested list longer than the cap that closes is read whole (``json`` reads it),
    and the reading goes on after it."""
    many = [{"id": f"c{i}"} for i in range(MAX_SALVAGED_ITEMS + 5)]
    text = json.dumps({"data": {"results": many, "query": "q"}, "more": [1, 2]})
    parsed = parse_records_text(text[:-3])  # cut inside "more"
    assert parsed is not None and parsed[1] == "cut"
    assert parsed[0]["data"] == {"results": many, "query": "q"}
    assert parsed[0]["more"] == [1]


@settings(max_examples=examples(300))
@given(
    st.lists(
        st.sampled_from(
            ["True", "False", "None", "inf", "nan", "x", "_", "1", "中", "\x00", " ", ",", "é", "٣"]
        ),
        max_size=30,
    ).map("".join)
)
def test_repr_words_are_replaced_only_as_whole_words(between: str) -> None:
    """The words become JSON's only where ``re``'s ``\\b`` is on both sides."""
    expected = re.sub(
        r"\b(?:True|False|None|inf|nan)\b",
        lambda m: {
            "True": "true",
            "False": "false",
            "None": "null",
            "inf": "Infinity",
            "nan": "NaN",
        }[m.group()],
        between,
    )
    assert _REPR_WORDS.sub(_json_word, between) == expected
