"""Amazon DataZone (SageMaker Unified Studio) as an OpenLineage transport, with an idempotency token per event.

openlineage-python's ``AmazonDataZoneTransport`` (``type: amazon_datazone_api``) posts each RunEvent with
``PostLineageEvent`` and skips other events; it sends no ``clientToken``, so botocore fills in a random one
and an event sent again (a redelivered function, a retried step) is a second event to DataZone. Lakeline's
subclass, registered under the same type, wraps the transport's boto3 client so that each call carries the
token of the part being sent (``bound.EventPart.client_token``: run id, event type, event time, part
number), which the emitter sets in ``sending_token`` around the client's ``emit``; an event sent by other
code gets the token of its run id, type and time. It also refuses an event over DataZone's bound before
sending it (the emitter splits every event under it), and reads its settings from variables as well:
``OPENLINEAGE__TRANSPORT__DOMAINID`` arrives lower-cased, as ``domainid``.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from openlineage.client.transport import AmazonDataZoneTransport, register_transport
from openlineage.client.transport.amazon_datazone import AmazonDataZoneConfig

from lakeline.lineage.openlineage.bound import EVENT_SIZE_LIMIT, client_token

_TOKEN: contextvars.ContextVar[str | None] = contextvars.ContextVar("lakeline_openlineage_client_token", default=None)
_SPELLINGS = {"domainid": "domainId", "endpointoverride": "endpointOverride"}


@contextmanager
def sending_token(token: str) -> Iterator[None]:
    """The client token of the event sent inside the block."""
    reset = _TOKEN.set(token)
    try:
        yield
    finally:
        _TOKEN.reset(reset)


def token_of(body: bytes) -> str:
    """The token of the event being sent: the one set by the emitter, else that of the event's run and type."""
    token = _TOKEN.get()
    if token is not None:
        return token
    event = json.loads(body)
    return client_token(str(event["run"]["runId"]), str(event["eventType"]))


class _TokenedClient:
    """The boto3 ``datazone`` client, its ``post_lineage_event`` given the event's client token."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def post_lineage_event(self, *, domainIdentifier: str, event: bytes, **rest: Any) -> Any:  # noqa: N803 (boto3's names)
        if len(event) > EVENT_SIZE_LIMIT:
            raise ValueError(f"event of {len(event)} bytes is over DataZone's {EVENT_SIZE_LIMIT}")
        return self._client.post_lineage_event(
            domainIdentifier=domainIdentifier, event=event, clientToken=token_of(event), **rest
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class DataZoneConfig(AmazonDataZoneConfig):
    @classmethod
    def from_dict(cls, params: dict[str, Any]) -> DataZoneConfig:
        config = AmazonDataZoneConfig.from_dict({_SPELLINGS.get(key, key): value for key, value in params.items()})
        return cls(domain_id=config.domain_id, region=config.region, endpoint_override=config.endpoint_override)


class DataZoneTransport(AmazonDataZoneTransport):
    """``AmazonDataZoneTransport`` sending each event's client token; see the module docstring."""

    config_class = DataZoneConfig

    def _setup_datazone(self, region: str | None = None, endpoint_url: str | None = None) -> None:
        super()._setup_datazone(region, endpoint_url)
        self.datazone = _TokenedClient(self.datazone)  # type: ignore[assignment]


def datazone_domains(transport: Mapping[str, Any] | None) -> list[tuple[str, str | None]]:
    """(domain id, region or None) of each DataZone transport in a transport config, inside ``composite`` ones too."""
    if not transport:
        return []
    if transport.get("type") == AmazonDataZoneTransport.kind:
        params = {_SPELLINGS.get(key, key): value for key, value in transport.items()}
        return [(str(params["domainId"]), str(params["region"]) if params.get("region") else None)]
    if transport.get("type") == "composite":
        inner = transport.get("transports") or []
        configs = inner.values() if isinstance(inner, Mapping) else inner
        return [domain for config in configs if isinstance(config, Mapping) for domain in datazone_domains(config)]
    return []


def register_datazone_transport() -> None:
    """Make ``type: amazon_datazone_api`` build ``DataZoneTransport`` (also inside a ``composite`` transport)."""
    register_transport(DataZoneTransport)
