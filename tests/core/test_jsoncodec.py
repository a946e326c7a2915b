"""The API client's JSON codec: compact bytes; the standard library where orjson refuses."""

from __future__ import annotations

import json

import pytest

from clusterhealth_core.kube import jsoncodec


@pytest.mark.parametrize("value", [
    {"metadata": {"name": "member1"}, "status": {"remedyActions": ["TrafficControl"]}},
    {"text": "é ✓", "n": -(2**63), "f": 1.5e-07, "none": None, "list": [1, [2, {}]]},
    [], "plain", 0,
])
def test_a_value_round_trips_as_compact_json(value: object) -> None:
    encoded = jsoncodec.dumps(value)
    assert isinstance(encoded, bytes)
    assert jsoncodec.loads(encoded) == value
    assert jsoncodec.loads(encoded.decode()) == value
    assert json.loads(encoded) == value
    assert b", " not in encoded and b": " not in encoded


@pytest.mark.parametrize("value", [{1: "a key that is not a string"}, {"big": 2**70}])
def test_what_orjson_refuses_is_encoded_as_the_standard_library_does(value: object) -> None:
    assert jsoncodec.dumps(value) == json.dumps(value, separators=(",", ":")).encode()


def test_what_neither_can_encode_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        jsoncodec.dumps({"a": object()})


@pytest.mark.parametrize("text", ["", "{", "{'a': 1}", "NaN", b"\xff"])
def test_what_is_not_json_is_a_value_error(text: str | bytes) -> None:
    with pytest.raises(json.JSONDecodeError):  # a ValueError, as json.loads raises
        jsoncodec.loads(text)
