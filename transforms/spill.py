"""Spill files: where encoded records wait, outside the graph, until a shard writer copies them.

Each decode bundle appends its records' TFRecord frames to one file of its own, named at random under
the version's staging folder (``layout.SPILL_DIR``), local or ``gs://``. A bundle that fails leaves an
orphan file that nothing refers to; publishing deletes the whole spill folder.
"""
import os
import uuid

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from contract import layout


class SpillFile:
    """Appends frames to a new file, opened at the first append; returns where each one landed."""

    def __init__(self, spill_dir):
        self._spill_dir = spill_dir
        self._path = None
        self._stream = None
        self._offset = 0

    def append(self, frame):
        """Writes ``frame``; returns (file, offset, length)."""
        if self._stream is None:
            self._path = layout.join(self._spill_dir, f'{uuid.uuid4().hex}.spill')
            if FileSystems.get_scheme(self._path) is None:
                os.makedirs(self._spill_dir, exist_ok=True)
            self._stream = FileSystems.create(self._path, mime_type='application/octet-stream',
                                              compression_type=CompressionTypes.UNCOMPRESSED)
        offset = self._offset
        self._stream.write(frame)
        self._offset += len(frame)
        return self._path, offset, len(frame)

    def close(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None
