"""Validation of OpenLineage events against the official JSON schemas vendored in ``openlineage_spec/``.

The event is checked against the schema its ``schemaURL`` names (``RunEvent`` of 2-0-2), and every facet
(run, job, dataset, input and output facets) against the schema its ``_schemaURL`` names: the core schema
only says a facet is an object with ``_producer`` and ``_schemaURL``. A facet with no vendored schema is
checked against the facet class openlineage-python generated from that schema (the same ``_schemaURL``,
from PyPI): its fields' names, types and which are required, as a JSON schema (``_client_schema``). A facet
neither knows is an error, so nothing goes unchecked.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import types
import typing
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attr
import openlineage.client.generated
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

SPEC = Path(__file__).parent / "openlineage_spec"

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
"""RFC 3986's ``scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )``."""


def is_absolute_uri(text: object) -> bool:
    """Whether ``text`` is an absolute URI (RFC 3986 ``absolute-URI``), as producers and schema URLs must be.

    jsonschema checks the ``uri`` format only with ``rfc3987`` installed, and it is not: without a checker
    any string passed. This is a small check by ``urllib.parse``: a scheme, then an authority or a path,
    and none of the characters a URI never holds unescaped (spaces, controls, quotes, angle brackets).
    """
    if not isinstance(text, str):
        return True  # formats apply to strings only; the schema's "type" judges the rest
    if any(character.isspace() or not character.isprintable() or character in '"<>\\^`{|}' for character in text):
        return False
    parts = urlsplit(text)
    return bool(SCHEME.match(parts.scheme)) and bool(parts.netloc or parts.path)


def _format_checker() -> FormatChecker:
    # The draft's own checks (uuid, date-time, ...) in a new checker, not the shared one, plus "uri".
    checker = FormatChecker(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("uri")(is_absolute_uri)
    return checker


class EventSchemaError(AssertionError):
    """An event or one of its facets does not match the OpenLineage schema it names."""


@cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SPEC.glob("*.json")):
        document = json.loads(path.read_text())
        resources.append((document["$id"], Resource.from_contents(document)))
    return Registry().with_resources(resources)


@cache
def _client_facets() -> dict[str, type]:
    """openlineage-python's generated facet classes by the schema URL each names."""
    found: dict[str, type] = {}
    package = openlineage.client.generated
    for module in pkgutil.iter_modules(package.__path__):
        for value in vars(importlib.import_module(f"{package.__name__}.{module.name}")).values():
            if isinstance(value, type) and attr.has(value) and "_get_schema" in vars(value):
                found[value._get_schema()] = value
    return found


def _type_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of a generated class's field type (a facet's JSON has no nulls: the client drops them)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [_type_schema(arg) for arg in args if arg is not type(None)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0])}
    if origin is dict or hint is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1]) if args else {}}
    if isinstance(hint, type) and attr.has(hint):
        return _client_schema(hint)
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    return {"type": simple[hint]} if hint in simple else {}


def _client_schema(facet_class: type) -> dict[str, Any]:
    hints = typing.get_type_hints(facet_class)
    fields = attr.fields(facet_class)
    return {
        "type": "object",
        "properties": {field.name: _type_schema(hints[field.name]) for field in fields},
        # Every facet names its producer and schema (BaseFacet's required fields; the class fills them in).
        "required": [f.name for f in fields if f.default is attr.NOTHING or f.name in ("_producer", "_schemaURL")],
    }


@cache
def _validator(schema_url: str) -> Draft202012Validator:
    document = schema_url.partition("#")[0]
    registry = _registry()
    if document not in registry:
        facet_class = _client_facets().get(schema_url)
        if facet_class is None:
            raise EventSchemaError(f"no OpenLineage schema known for {schema_url} (vendored or openlineage-python's)")
        return Draft202012Validator(_client_schema(facet_class), format_checker=_format_checker())
    # Formats too: run ids are "uuid", event times "date-time", producers and schema URLs "uri".
    return Draft202012Validator({"$ref": schema_url}, registry=registry, format_checker=_format_checker())


def facets_of(event: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every facet of ``event`` (run, job, dataset, input, output), with where it is."""
    for where in ("run", "job"):
        for name, facet in ((event.get(where) or {}).get("facets") or {}).items():
            yield f"{where}.facets.{name}", facet
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for index, dataset in enumerate(event.get(side) or []):
            for key in ("facets", extra):
                for name, facet in (dataset.get(key) or {}).items():
                    yield f"{side}[{index}].{key}.{name}", facet


def validate_event(event: Mapping[str, Any]) -> None:
    """Raise ``EventSchemaError`` naming the first place where ``event`` breaks its schemas."""
    checks = [("event", event.get("schemaURL"), event)]
    checks += [(where, facet.get("_schemaURL"), facet) for where, facet in facets_of(event)]
    for where, schema_url, document in checks:
        if not isinstance(schema_url, str):
            raise EventSchemaError(f"{where} has no schema URL")
        try:
            _validator(schema_url).validate(document)
        except ValidationError as error:
            path = "/".join(str(part) for part in error.absolute_path)
            raise EventSchemaError(f"{where} ({schema_url}) at '{path}': {error.message}") from None


def validate_events_file(path: Path) -> int:
    """Validate each event of a JSON Lines file (what a subprocess wrote: the autouse check in
    ``tests/conftest.py`` sees only events made in the test process); return how many there are.

    The events kept are the events sent, so each is also held to the bound every transport's event is
    (``lineage.openlineage.bound``: DataZone's 300,000), as the JSON transports write it."""
    from lakeline.lineage.openlineage.bound import EVENT_SIZE_LIMIT

    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
            validate_event(event)
            size = len(json.dumps(event, sort_keys=True).encode("utf-8"))
            if size > EVENT_SIZE_LIMIT:
                raise EventSchemaError(f"{size} bytes, over the {EVENT_SIZE_LIMIT} every event is held to")
        except EventSchemaError as error:
            raise EventSchemaError(f"{path}, line {number}: {error}") from None
    return len(lines)
