"""What moto (pinned in constraints.txt) needs to stand Lakeline's synthesized stacks up as CloudFormation
would, each fix small and named by the defect it works around. ``install`` applies them once, in the
process that runs the moto server; ``tests/rehearsal/test_moto_fixes.py`` fails when a moto upgrade
changes the code they patch.

- ``AWS::KMS::Key`` with ``Tags``: moto's model passes CloudFormation's ``Key``/``Value`` tags to a
  backend that expects ``TagKey``/``TagValue``; the stack then fails with a misleading ``Fn::GetAtt``
  error about the key.
- EventBridge: S3's delivery loops over every rule inside one bare ``except``, and a rule with a Lambda
  target (the nightly lineage schedule) raises ``NotImplementedError``, which silently stops delivery to
  every other rule (the raw-arrival rule into queue A); and a scheduled rule, which has no pattern, matches
  every event. A scheduled rule gets no event here, and a Lambda target is invoked as EventBridge invokes it
  (``lakeline.runtimes.deployed.local_aws.events``).
- Custom resources: moto invokes their handler function in Docker and waits for a response to a URL
  inside Docker. Here they are carried out in-process (``custom_resources``), as the CDK handlers would.
- ``AWS::Lambda::Function``: moto's CloudFormation drops ``Layers``, so every deployed function ran with
  no layer at all (the stage functions failed to import ``openlineage``). The layers are attached here.
- Lambda's 4 KB bound on a function's environment (``lakeline.aws.lambda_limits``): moto takes any size, so a
  deployment that AWS refuses (too many table settings in a router's environment, before they moved to the code
  asset) stood up here. A function whose environment is over the bound is refused, created or updated, with
  the biggest variables named (``_refuse_large_environments``).
- ``AWS::Athena::WorkGroup``, ``AWS::Glue::Database``, ``AWS::Glue::Table``: moto's CloudFormation
  skips them ("No Moto CloudFormation support"), so every statement failed on a missing workgroup.
  They are created through moto's own Athena and Glue backends (``_CATALOG_MODELS``), with the
  properties CloudFormation resolved.
- ``AWS::Glue::Job``, ``AWS::Glue::SecurityConfiguration`` (the Spark engine's): skipped likewise, so the
  Glue job tasks found no job. Created the same way; a job without ``Name`` gets the generated name.
- DynamoDB: moto checks a write's condition, then applies it, with nothing between the two, while the
  server answers requests on many threads: two writers could both pass one condition. The partition
  commits rest on conditional writes being atomic, as they are in DynamoDB; here a run's release of its
  lease met a message queuing behind that lease, and the message was left waiting with no run to take
  it (a trailing window never rebuilt once its last day was published, #36). Requests are served one at
  a time (``_serialize_dynamodb``).
- DynamoDB streams: moto gives new records to the mapped function and drops them whatever it answered, and numbers
  a record by its place among those not yet delivered (numbers came round again). Delivery follows the mapping's
  retries, bisection, partial batch responses and on-failure destination (``_deliver``,
  ``lakeline.runtimes.deployed.local_aws.streams``), and sequence numbers keep rising.

- Work that grows with what the account holds, on every request (``_serve_in_bounded_time``): the server
  lists moto's package folder to route each request; receiving a message reads every attribute of its
  queue, counting all its messages, to find the retention period, and sending one does the same to find
  whether a FIFO queue deduplicates by content; a DynamoDB query on a table's key sorts
  every item of the table to find one key's. A burst of 2,000 arrivals, and the nightly trace's query per
  lineage root, slowed down as the queue and the tables filled (#39).

``stable_resource_names`` is not a fix but a choice for a deployment stood up again over a kept state
(``lakeline.runtimes.deployed.local_aws.kept_state``): generated names that do not change from one deployment to
the next.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from lakeline.aws.lambda_limits import environment_refusal
from lakeline.runtimes.deployed.local_aws import streams

CustomResourceHandler = Callable[[str, str, dict[str, Any]], dict[str, Any]]
"""(account, region, the resource's properties) → the attributes it returns (``Fn::GetAtt``)."""

_installed = threading.Lock()
_done = False


def install(custom_resources: dict[str, CustomResourceHandler]) -> None:
    """Apply the fixes (once per process); ``custom_resources`` maps a resource type to its handler."""
    global _done
    with _installed:
        if _done:
            return
        _fix_kms_key_tags()
        _fix_events_lambda_targets()
        _carry_out_custom_resources(custom_resources)
        _fix_lambda_function_layers()
        _refuse_large_environments()
        _create_catalog_and_workgroups()
        _serialize_dynamodb()
        _serve_in_bounded_time()
        _done = True


@contextmanager
def stable_resource_names(account: str, region: str) -> Iterator[None]:
    """While entered, the names CloudFormation makes up for resources without one end in a digest of the
    account, region, stack and logical id instead of a random suffix: a deployment stood up again has the
    names the earlier one had (its buckets, tables and queues, which a kept state names, are found again;
    in AWS a stack keeps them by living on)."""
    from moto.cloudformation import parsing

    original = parsing.generate_resource_name
    size = 12  # moto's random_suffix

    def generate(resource_type: str, stack_name: str, logical_id: str) -> str:
        name = original(resource_type, stack_name, logical_id)
        digest = hashlib.sha256(f"{account}/{region}/{stack_name}/{logical_id}".encode()).hexdigest()[:size]
        return name[:-size] + (digest if resource_type == "AWS::S3::Bucket" else digest.upper())

    parsing.generate_resource_name = generate
    try:
        yield
    finally:
        parsing.generate_resource_name = original


DYNAMODB_REQUESTS = threading.RLock()
"""Held while moto serves a DynamoDB request (``_serialize_dynamodb``)."""
_deliveries = threading.local()


def _serialize_dynamodb() -> None:
    """One DynamoDB request at a time. A write to a table with a stream mapped to a function makes moto
    invoke that function before it answers, and the function's own requests would wait for the lock:
    the records are delivered once the request is served, outside the lock."""
    from moto.dynamodb.models.table import StreamShard
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    original_add = StreamShard.add

    def call_action(self: Any) -> Any:
        shards: list[Any] = []
        _deliveries.shards = shards
        try:
            with DYNAMODB_REQUESTS:
                return original(self)
        finally:
            _deliveries.shards = None
            for shard in {id(shard): shard for shard in shards}.values():
                _deliver(shard)

    def add(self: Any, old: Any, new: Any) -> None:
        shards = getattr(_deliveries, "shards", None)
        mappings = self.table.lambda_event_source_mappings
        if shards is None or not mappings:
            original_add(self, old, new)
            return
        self.table.lambda_event_source_mappings = {}  # the record is kept; its delivery waits
        try:
            original_add(self, old, new)
        finally:
            self.table.lambda_event_source_mappings = mappings
        # moto numbers a record by its place among the records not yet delivered, so numbers came round again after
        # each delivery: a sequence number (a partial batch response's, a parked record's) must name one record.
        self._lakeline_sequence = max(getattr(self, "_lakeline_sequence", 0), int(self.starting_sequence_number)) + 1
        self.items[-1].record["dynamodb"]["SequenceNumber"] = str(self._lakeline_sequence)
        shards.append(self)

    setattr(DynamoHandler, "call_action", call_action)  # noqa: B010
    setattr(StreamShard, "add", add)  # noqa: B010


_querying = threading.local()
_sending = threading.local()


def _serve_in_bounded_time() -> None:
    """Route requests, receive messages and query a table's key without walking everything the account holds
    (each replacement gives what moto's own gives)."""
    from moto import backends
    from moto.dynamodb.models.table import Table
    from moto.sqs.models import Queue, SQSBackend

    modules = frozenset(backends.list_of_moto_modules())  # moto's package folder does not change while it runs
    original_query, original_all_items = Table.query, Table.all_items
    original_send = SQSBackend.send_message
    original_attributes: Any = Queue.attributes  # a property

    def list_of_moto_modules() -> frozenset[str]:
        return modules

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        from moto.core.utils import unix_time

        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > unix_time())

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        _sending.queue = None if queue.fifo_queue else queue  # only ``ContentBasedDeduplication`` is read, FIFO's
        try:
            return original_send(self, queue_name, *args, **kwargs)
        finally:
            _sending.queue = None

    def attributes(self: Any) -> dict[str, Any]:
        if getattr(_sending, "queue", None) is self:
            return {}  # a standard queue has no ``ContentBasedDeduplication``
        return original_attributes.fget(self)  # type: ignore[no-any-return]

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name or hash_key is None:
            return original_query(self, hash_key, *args, **kwargs)
        _querying.key = (self, hash_key)  # the table's own key: only its items are candidates (``all_items``)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _querying.key = None

    def all_items(self: Any) -> list[Any]:
        key = getattr(_querying, "key", None)
        if key is None or key[0] is not self:
            return original_all_items(self)
        found = self.items.get(key[1])  # not ``[]``: the items are a defaultdict, and a read must not add a key
        if found is None:
            return []
        if not self.range_key_attr:
            return [found]
        return sorted(found.values(), key=lambda item: item.range_key)

    setattr(backends, "list_of_moto_modules", list_of_moto_modules)  # noqa: B010
    setattr(SQSBackend, "is_message_valid_based_on_retention_period", is_message_valid_based_on_retention_period)  # noqa: B010
    setattr(SQSBackend, "send_message", send_message)  # noqa: B010
    setattr(Queue, "attributes", property(attributes))  # noqa: B010
    setattr(Table, "query", query)  # noqa: B010
    setattr(Table, "all_items", all_items)  # noqa: B010


def _deliver(shard: Any) -> None:
    """What moto's ``StreamShard.add`` does after keeping a record, as Lambda's stream poller does it
    (``lakeline.runtimes.deployed.local_aws.streams``): send the shard's records to the mapped functions in order,
    retrying what a function failed and sending what it kept failing to the mapping's on-failure destination, then drop
    them. One delivery per shard at a time, so that a shard's records reach a function in their order."""
    with _shard_lock(shard):
        with DYNAMODB_REQUESTS:
            records = list(shard.items)
            mappings = [mapping for mapping in shard.table.lambda_event_source_mappings.values() if mapping.enabled]
        if not records:
            return
        for mapping in mappings:
            _deliver_to(shard, streams.StreamMapping.of(mapping), records)
        with DYNAMODB_REQUESTS:
            shard.items = [record for record in shard.items if all(record is not sent for sent in records)]


_shard_locks_lock = threading.Lock()


def _shard_lock(shard: Any) -> threading.Lock:
    with _shard_locks_lock:
        lock: threading.Lock | None = getattr(shard, "_lakeline_delivery", None)
        if lock is None:
            lock = threading.Lock()
            shard._lakeline_delivery = lock
        return lock


def _deliver_to(shard: Any, mapping: streams.StreamMapping, records: list[Any]) -> None:
    from moto.awslambda.utils import get_backend
    from moto.core.utils import unix_time
    from moto.sqs.models import sqs_backends

    region = mapping.function_arn.split(":")[3]
    events = []
    for record in records:  # as moto's ``send_dynamodb_items`` spells them, Lambda's event records
        change = dict(record.record["dynamodb"])
        if isinstance(change.get("ApproximateCreationDateTime"), datetime):
            change["ApproximateCreationDateTime"] = unix_time(change["ApproximateCreationDateTime"])
        events.append(
            {
                **{name: record.record[name] for name in ("eventID", "eventName", "eventVersion", "eventSource")},
                "awsRegion": region,
                "dynamodb": change,
                "eventSourceARN": mapping.stream_arn,
            }
        )

    def invoke(batch: list[dict[str, Any]]) -> streams.BatchAnswer:
        headers: dict[str, Any] = {}
        try:
            reply = get_backend(shard.account_id, region).invoke(
                function_name=mapping.function_arn,
                qualifier=None,
                body=json.dumps({"Records": batch}),
                headers={},
                response_headers=headers,
            )
        except Exception:  # the function could not be run at all: the batch failed, as in AWS
            return streams.BatchAnswer(0, whole=True)
        errored = "x-amz-function-error" in headers
        return streams.outcome_of(mapping, batch, errored, None if errored or not reply else json.loads(reply))

    def send_failure(destination: str, body: str) -> None:
        _, _, service, destination_region, account, name = destination.split(":", 5)
        if service != "sqs":
            raise NotImplementedError(f"on-failure destination {destination}: only SQS is rehearsed")
        sqs_backends[account][destination_region].send_message(name, body)

    streams.deliver_stream(mapping, shard.id, events, invoke, send_failure)


def _fix_kms_key_tags() -> None:
    import moto.kms.models as kms_models

    original = getattr(kms_models.Key.create_from_cloudformation_json, "__func__")  # noqa: B009 (untyped)

    def create(cls: Any, resource_name: str, cloudformation_json: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        properties = cloudformation_json.get("Properties", {})
        tags = properties.get("Tags") or []
        if tags and "Key" in tags[0]:
            properties["Tags"] = [{"TagKey": tag["Key"], "TagValue": tag["Value"]} for tag in tags]
        return original(cls, resource_name, cloudformation_json, *args, **kwargs)

    setattr(kms_models.Key, "create_from_cloudformation_json", classmethod(create))  # noqa: B010


def _fix_events_lambda_targets() -> None:
    import moto.events.models as events_models

    from lakeline.runtimes.deployed.local_aws.events import deliver, lambda_targets

    original = events_models.Rule.send_to_targets

    def send_to_targets(self: Any, event: Any, transform_input: bool = True) -> Any:
        if self.scheduled_expression:
            return None  # a scheduled rule matches no event: its schedule fires it (events.fire_schedules)
        # A Lambda target raises: it is delivered below, and the other rules still get the event.
        with contextlib.suppress(NotImplementedError):
            original(self, event, transform_input=transform_input)
        if lambda_targets(self) and self.event_pattern.matches_event(event):
            deliver(self, event)
        return None

    setattr(events_models.Rule, "send_to_targets", send_to_targets)  # noqa: B010


def _carry_out_custom_resources(handlers: dict[str, CustomResourceHandler]) -> None:
    import moto.cloudformation.custom_model as custom_model
    from moto.cloudformation.models import cloudformation_backends

    def create(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        resource_type = kwargs["ResourceType"]
        handler = handlers.get(resource_type)
        if handler is None:
            raise NotImplementedError(f"the rehearsal cannot carry out custom resource {resource_type}")
        model: Any = custom_model.CustomModel  # abstract for mypy; moto instantiates it the same way
        resource = model(region_name, "rehearsal", kwargs["LogicalId"], resource_name)
        cloudformation_backends[account_id][region_name].get_stack(kwargs["StackId"]).add_custom_resource(resource)
        resource.set_data(handler(account_id, region_name, cloudformation_json["Properties"]))
        return resource

    setattr(custom_model.CustomModel, "create_from_cloudformation_json", classmethod(create))  # type: ignore[arg-type]  # noqa: B010


def _fix_lambda_function_layers() -> None:
    import moto.awslambda.models as lambda_models

    original = getattr(lambda_models.LambdaFunction.create_from_cloudformation_json, "__func__")  # noqa: B009

    def create(cls: Any, resource_name: str, cloudformation_json: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        function = original(cls, resource_name, cloudformation_json, *args, **kwargs)
        # A layer of the same stack arrives as moto's LayerVersion object, a public one as its ARN.
        layers = [getattr(layer, "arn", layer) for layer in cloudformation_json["Properties"].get("Layers") or []]
        function.layers = function._get_layers_data(layers)  # fails as AWS would on an unknown layer
        return function

    setattr(lambda_models.LambdaFunction, "create_from_cloudformation_json", classmethod(create))  # noqa: B010


def _refuse_large_environments() -> None:
    """Lambda refuses a function whose environment passes 4 KB (``lakeline.aws.lambda_limits``), whether
    CloudFormation creates it or an update configures it; moto takes any size, so a deployment that fails in AWS
    would pass here."""
    import moto.awslambda.models as lambda_models
    from moto.awslambda.exceptions import InvalidParameterValueException

    def refuse(function: str, environment: Any) -> None:
        variables = (environment or {}).get("Variables") or {}
        refusal = environment_refusal(function, {str(key): str(value) for key, value in variables.items()})
        if refusal is not None:
            raise InvalidParameterValueException(refusal)

    original_init = lambda_models.LambdaFunction.__init__
    original_update = lambda_models.LambdaFunction.update_configuration

    def init(self: Any, account_id: str, spec: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        refuse(str(spec.get("FunctionName")), spec.get("Environment"))
        original_init(self, account_id, spec, *args, **kwargs)

    def update(self: Any, config_updates: dict[str, Any]) -> Any:
        if "Environment" in config_updates:
            refuse(self.function_name, config_updates["Environment"])
        return original_update(self, config_updates)

    setattr(lambda_models.LambdaFunction, "__init__", init)  # noqa: B010
    setattr(lambda_models.LambdaFunction, "update_configuration", update)  # noqa: B010


class _CreatedByApi:
    """What a resource created through a backend's API gives CloudFormation back: its physical id."""

    def __init__(self, physical_resource_id: str) -> None:
        self.physical_resource_id = physical_resource_id

    def is_created(self) -> bool:
        return True

    def get_cfn_attribute(self, attribute_name: str) -> str:
        raise NotImplementedError(f"the rehearsal gives no attribute {attribute_name} of this resource")


def _work_group(account: str, region: str, properties: dict[str, Any], _generated: str) -> str:
    from moto.athena.models import athena_backends

    name = properties["Name"]
    athena_backends[account][region].create_work_group(
        name,
        properties.get("WorkGroupConfiguration", {}),
        properties.get("Description", ""),
        properties.get("Tags", []),
    )
    return str(name)


def _glue_database(account: str, region: str, properties: dict[str, Any], _generated: str) -> str:
    from moto.glue.models import glue_backends

    database = properties["DatabaseInput"]
    glue_backends[account][region].create_database(database["Name"], database)
    return str(database["Name"])


def _glue_table(account: str, region: str, properties: dict[str, Any], _generated: str) -> str:
    from moto.glue.models import glue_backends

    table = properties["TableInput"]
    glue_backends[account][region].create_table(properties["DatabaseName"], table["Name"], table)
    return f"{properties['DatabaseName']}|{table['Name']}"


def _glue_job(account: str, region: str, properties: dict[str, Any], generated: str) -> str:
    """A Glue job, named as CloudFormation names one without ``Name`` (the generated name is its Ref)."""
    from moto.glue.models import glue_backends

    name = str(properties.get("Name") or generated)
    backend: Any = glue_backends[account][region]  # moto's signature wants values CloudFormation may leave out
    backend.create_job(
        name=name,
        role=properties["Role"],
        command=properties["Command"],
        description=properties.get("Description", ""),
        log_uri=properties.get("LogUri", ""),
        execution_property=properties.get("ExecutionProperty", {}),
        default_arguments=properties.get("DefaultArguments", {}),
        non_overridable_arguments=properties.get("NonOverridableArguments", {}),
        connections=properties.get("Connections", {}),
        max_retries=properties.get("MaxRetries", 0),
        allocated_capacity=properties.get("AllocatedCapacity"),
        timeout=properties.get("Timeout"),
        max_capacity=properties.get("MaxCapacity"),
        security_configuration=properties.get("SecurityConfiguration"),
        tags=properties.get("Tags", {}),
        notification_property=properties.get("NotificationProperty"),
        glue_version=properties.get("GlueVersion"),
        number_of_workers=properties.get("NumberOfWorkers"),
        worker_type=properties.get("WorkerType"),
        code_gen_configuration_nodes=properties.get("CodeGenConfigurationNodes"),
        execution_class=properties.get("ExecutionClass"),
        source_control_details=properties.get("SourceControlDetails"),
    )
    return name


def _glue_security_configuration(account: str, region: str, properties: dict[str, Any], _generated: str) -> str:
    from moto.glue.models import glue_backends

    glue_backends[account][region].create_security_configuration(
        properties["Name"], properties.get("EncryptionConfiguration", {})
    )
    return str(properties["Name"])


_CATALOG_MODELS: dict[str, Callable[[str, str, dict[str, Any], str], str]] = {
    "AWS::Athena::WorkGroup": _work_group,
    "AWS::Glue::Database": _glue_database,
    "AWS::Glue::Table": _glue_table,
    "AWS::Glue::Job": _glue_job,
    "AWS::Glue::SecurityConfiguration": _glue_security_configuration,
}


def _create_catalog_and_workgroups() -> None:
    import moto.cloudformation.parsing as parsing

    original = parsing.resource_class_from_type

    def model_for(create: Callable[[str, str, dict[str, Any], str], str]) -> Any:
        class Model:
            @classmethod
            def create_from_cloudformation_json(
                cls,
                resource_name: str,
                cloudformation_json: dict[str, Any],
                account_id: str,
                region_name: str,
                **_: Any,
            ) -> _CreatedByApi:
                return _CreatedByApi(create(account_id, region_name, cloudformation_json["Properties"], resource_name))

        return Model

    models = {resource_type: model_for(create) for resource_type, create in _CATALOG_MODELS.items()}

    def resource_class_from_type(resource_type: str) -> Any:
        return models.get(resource_type) or original(resource_type)

    setattr(parsing, "resource_class_from_type", resource_class_from_type)  # noqa: B010
