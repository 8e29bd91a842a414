"""Spill files: where encoded records wait, outside the graph, until a shard writer copies them.

Each decode bundle appends its records' TFRecord frames to one file of its own, named at random under
the version's staging folder (``layout.SPILL_DIR``), local or ``gs://``. A bundle that fails leaves an
orphan file that nothing refers to; publishing deletes the whole spill folder.
"""
import uuid

from contract import layout
from imgrec_storage import fileio


class SpillFile:
    """Appends frames to a new file, opened at the first append; returns where each one landed."""

    def __init__(self, spill_dir, policy=None):
        self._spill_dir = spill_dir
        self._policy = policy
        self._stream = None
        self._offset = 0

    def append(self, frame):
        """Writes ``frame``; returns (file, offset, length)."""
        if self._stream is None:
            self._stream = fileio.StreamedFile(layout.join(self._spill_dir, f'{uuid.uuid4().hex}.spill'),
                                                self._policy)
        offset = self._offset
        self._stream.write(frame)
        self._offset += len(frame)
        return self._stream.path, offset, len(frame)

    def close(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None
