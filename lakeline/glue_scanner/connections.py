"""Where a Glue source or sink really is: Glue Connections, connection options, catalog tables' storage.

A script names data outside S3 in three ways: ``connection_options`` of ``from_options`` (``url`` and
``dbtable``, ``dynamodb.input.tableName``, ``streamName``, ``topicName`` ...), a Glue Connection
(``from_jdbc_conf(catalog_connection=...)``, ``connectionName``) whose properties hold the JDBC URL or
the Kafka brokers, or a catalog table whose storage is a connection's table, a DynamoDB table or a
stream. Each is turned into a dataset name of ``datasets``; what is missing raises ``NamingError``
with the reason, for the caller to report at its line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakeline.glue_scanner import datasets as ds
from lakeline.glue_scanner.catalog import GlueCatalog
from lakeline.glue_scanner.datasets import NamingError

JDBC_TYPES = frozenset({"postgresql", "mysql", "redshift", "sqlserver", "oracle", "jdbc"})
CONNECTOR_TYPES = frozenset({"custom.jdbc", "marketplace.jdbc", "custom.spark", "marketplace.spark", "snowflake"})
STREAM_TYPES = frozenset({"kinesis", "kafka"})
_TABLE_KEYS = ("dbtable", "dbTable", "tableName")


def _first(options: Mapping[str, str], *keys: str) -> str | None:
    return next((options[key] for key in keys if options.get(key)), None)


@dataclass(frozen=True)
class Endpoints:
    """The account's connections and where it runs: what names the data behind a connection."""

    catalog: GlueCatalog
    region: str | None = None
    account: str | None = None

    def connection_properties(self, name: str) -> dict[str, str]:
        connection = self.catalog.connection(name)
        if connection is None:
            raise NamingError(f"Glue connection {name!r} is not in the extracted connections (connections.json)")
        properties = connection.get("ConnectionProperties") or {}
        return {str(k): str(v) for k, v in properties.items()}

    def jdbc(self, connection_name: str | None, options: Mapping[str, str], *, what: str) -> str:
        """A JDBC table: the URL from the options or the connection, the table from ``dbtable``."""
        table = _first(options, *_TABLE_KEYS)
        if table is None:
            reason = "a query" if _first(options, "query", "sampleQuery") else "no dbtable"
            raise NamingError(f"{what} reads or writes {reason}: the table is not named")
        url = _first(options, "url", "JDBC_CONNECTION_URL")
        if url is None and connection_name:
            properties = self.connection_properties(connection_name)
            url = _first(properties, "JDBC_CONNECTION_URL", "CONNECTION_URL")
        if url is None:
            raise NamingError(f"{what} names no JDBC URL (url option or a Glue connection)")
        return ds.jdbc_dataset(url, table, options.get("database"))

    def options_dataset(self, connection_type: str, options: Mapping[str, str]) -> str:
        """The dataset of ``from_options(connection_type, connection_options)`` other than S3."""
        kind = connection_type.lower()
        connection_name = _first(options, "connectionName", "connection_name")
        if kind in JDBC_TYPES or kind in ("custom.jdbc", "marketplace.jdbc"):
            return self.jdbc(connection_name, options, what=f"{connection_type} connection")
        if kind == "dynamodb":
            table = _first(
                options, "dynamodb.tableArn", "dynamodb.input.tableName", "dynamodb.output.tableName", "tableName"
            )
            if table is None:
                raise NamingError("the DynamoDB options name no table (dynamodb.input/output.tableName)")
            return ds.dynamodb_dataset(table, self.region, self.account)
        if kind == "kinesis":
            return ds.kinesis_dataset(options, self.region)
        if kind == "kafka":
            return self.kafka(connection_name, options)
        properties = self.connection_properties(connection_name) if connection_name else {}
        merged = {**properties, **options}
        if kind == "snowflake" or "sfUrl" in merged or "sfURL" in merged:
            return self.snowflake(merged)
        if "JDBC_CONNECTION_URL" in merged or "url" in merged:
            return self.jdbc(None, merged, what=f"{connection_type} connector")
        connector = properties.get("CONNECTOR_CLASS_NAME") or connection_name or connection_type
        raise NamingError(f"the data of {connection_type} connector {connector} cannot be named from its options")

    def kafka(self, connection_name: str | None, options: Mapping[str, str]) -> str:
        topic = _first(options, "topicName", "subscribe", "topic")
        if topic is None:
            raise NamingError("the Kafka options name no topic (topicName)")
        servers = _first(options, "bootstrap.servers", "kafka.bootstrap.servers")
        if servers is None and connection_name:
            servers = self.connection_properties(connection_name).get("KAFKA_BOOTSTRAP_SERVERS")
        if servers is None:
            raise NamingError(
                f"the brokers of Kafka topic {topic!r} are not known (no connection, no bootstrap.servers)"
            )
        return ds.kafka_dataset(servers, topic)

    def snowflake(self, options: Mapping[str, str]) -> str:
        url = _first(options, "sfUrl", "sfURL", "SNOWFLAKE_URL")
        database, schema = _first(options, "sfDatabase", "sfdatabase"), _first(options, "sfSchema", "sfschema")
        table = _first(options, *_TABLE_KEYS)
        if not (url and database and schema and table):
            raise NamingError("the Snowflake options do not name sfUrl, sfDatabase, sfSchema and dbtable")
        return ds.snowflake_dataset(url, database, schema, table)

    def table_storage(self, database: str, table: str) -> str | None:
        """The dataset behind a catalog table stored outside S3 (JDBC, DynamoDB, a stream), else ``None``."""
        entry = self.catalog.tables.get((database.lower(), table.lower()))
        if entry is None:
            return None
        descriptor: dict[str, Any] = entry.get("StorageDescriptor") or {}
        parameters = {
            str(k): str(v)
            for k, v in {**(descriptor.get("Parameters") or {}), **(entry.get("Parameters") or {})}.items()
        }
        location = str(descriptor.get("Location") or "")
        # typeOfData names streams (kafka, kinesis); classification names DynamoDB tables.
        kinds = {parameters.get("typeOfData", "").lower(), parameters.get("classification", "").lower()}
        if "kafka" in kinds:
            return self.kafka(parameters.get("connectionName"), parameters)
        if "kinesis" in kinds:
            return ds.kinesis_dataset(parameters, self.region)
        if "dynamodb" in kinds:
            return ds.dynamodb_dataset(location or table, self.region, self.account)
        connection_name = parameters.get("connectionName")
        if connection_name and location and not location.startswith("s3"):
            return self.jdbc(connection_name, {"dbtable": location.replace("/", ".")}, what=f"table {database}.{table}")
        return None
