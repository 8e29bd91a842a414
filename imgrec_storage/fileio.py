"""The whole-file calls ``imgrec_storage.publication`` and ``imgrec.transforms.publish`` still make by name, until
they move onto ``storage.Storage``: each one a call of the path's storage under ``policy``."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from imgrec_storage import retries, storage


def read_bytes(path: str, policy: retries.RetryPolicy | None = None) -> bytes:
    return storage.storage_for(path, policy).read(path)


def write_bytes(path: str, data: bytes, policy: retries.RetryPolicy | None = None) -> None:
    storage.storage_for(path, policy).write(path, data)


def write_all(files: Mapping[str, bytes], policy: retries.RetryPolicy | None = None) -> None:
    if files:
        storage.storage_for(min(files), policy).write_all(files)


def copy(source: str, target: str, policy: retries.RetryPolicy | None = None) -> None:
    storage.storage_for(source, policy).copy(source, target)


def delete(path: str, policy: retries.RetryPolicy | None = None) -> None:
    storage.storage_for(path, policy).delete(path)


def retried(doing: str, what: str, attempt: Callable[[], Any], policy: retries.RetryPolicy | None) -> Any:
    return storage.retried(doing, what, attempt, policy or retries.default_policy())
