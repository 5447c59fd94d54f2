"""A failed run's files that cannot be deleted do not stop its end (#20): ``delete_run_files`` says why they
were left, for the parked reason, instead of failing the failure function (which then parked nothing)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from lakeline.partitions import delete_run_files
from lakeline.storage import DeleteRefused

LOCATION = "s3://team-bucket/orders/_lakeline_run_x/"


class Store:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def delete_prefix(self, location: str, *, table_root: str, table: str) -> int:
        if self.error is not None:
            raise self.error
        return 3


def refused(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, operation)


@pytest.mark.parametrize(
    "error",
    [
        refused("ListObjectsV2"),  # listing refused: the whole request
        DeleteRefused(f"could not delete 2 objects under {LOCATION}: {{'Code': 'AccessDenied'}}"),  # per key
    ],
)
def test_a_refused_delete_is_reported_and_the_run_goes_on(error: Exception) -> None:
    store: Any = Store(error)
    deleted, left = delete_run_files(store, LOCATION, "s3://team-bucket/orders/", "sales.orders")
    assert deleted == 0 and left.startswith(f"its files under {LOCATION} were left: ")
    assert "AccessDenied" in left or "Access Denied" in left


def test_files_deleted_leave_nothing_to_report() -> None:
    store: Any = Store(None)
    assert delete_run_files(store, LOCATION, "s3://team-bucket/orders/", "sales.orders") == (3, "")


def test_anything_else_still_fails() -> None:
    store: Any = Store(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        delete_run_files(store, LOCATION, "s3://team-bucket/orders/", "sales.orders")
