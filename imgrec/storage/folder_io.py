"""The folder operations every publication step shares: sizes below a folder, deletions several at a time, a
file's bytes or None, each through the output's storage the step was handed (``Output.storage``): its retry
policy and options, never a storage rebuilt."""
from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any

from imgrec.storage import retries
from imgrec.storage.crash_points import crash_point
from imgrec.storage.storage import Storage

# Objects copied or deleted at once where each call is a round trip (gs://).
THREADS = 8


def name_of(path: str) -> str:
    return path.rstrip('/').rsplit('/', 1)[-1]


def sizes(folder: str, storage: Storage) -> dict[str, int]:
    """{name relative to ``folder``: size} of every file below it."""
    prefix = folder.rstrip('/') + '/'
    return {entry.path[len(prefix):]: entry.size for entry in storage.list(folder)}


def each(function: Callable[[str], Any], items: Sequence[str]) -> None:
    """``function`` on every item, several at a time: on gs:// each call is a round trip."""
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        retries.counted_map(pool, function, items)


def delete_tree(folder: str, storage: Storage) -> None:
    """Deletes ``folder`` and everything below it, if it exists."""
    storage.delete_tree(folder)


def delete_in_halves(folder: str, step: str, storage: Storage) -> None:
    """Deletes everything below ``folder``, ``step`` (a test hook) half-way through."""
    paths = [entry.path for entry in storage.list(folder)]
    half = len(paths) // 2
    each(storage.delete, paths[:half])
    crash_point(step)
    each(storage.delete, paths[half:])
    storage.delete_tree(folder)  # what is left: local folders


def read_or_none(path: str, storage: Storage) -> bytes | None:
    """The file's bytes, or None when there is none."""
    found = storage.read_versioned(path)
    return None if found is None else found.data
