"""Spill files: where encoded records wait, outside the graph, until a shard writer copies them.

Each decode bundle appends its records' TFRecord frames to one file of its own, named at random under
the version's staging folder (``layout.SPILL_DIR``), local or ``gs://``. A bundle that fails leaves an
orphan file that nothing refers to; publishing deletes the whole spill folder.
"""
from __future__ import annotations

import uuid

from imgrec.contract import layout
from imgrec.storage.storage import Storage, Writer


class SpillFile:
    """Appends frames to a new file, opened at the first append; returns where each one landed."""

    def __init__(self, spill_dir: str, storage: Storage):
        self._spill_dir = spill_dir
        self._storage = storage
        self._stream: Writer | None = None
        self._path = ''
        self._offset = 0

    def append(self, frame: bytes) -> tuple[str, int, int]:
        """Writes ``frame``; returns (file, offset, length)."""
        if self._stream is None:
            self._path = layout.join(self._spill_dir, f'{uuid.uuid4().hex}.spill')
            self._stream = self._storage.open_write(self._path)
        offset = self._offset
        self._stream.write(frame)
        self._offset += len(frame)
        return self._path, offset, len(frame)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
