"""Spill files: where encoded records wait, outside the graph, until a shard writer copies them.

Each decode bundle appends its records' TFRecord frames to one file of its own, named at random under
the version's staging folder (``layout.SPILL_DIR``), local or ``gs://``. A bundle that fails leaves an
orphan file that nothing refers to; publishing deletes the whole spill folder.

Each record's frame is followed by a second frame, its facts (what the graph knows of the image besides its
Example: its stamp, decisions, hashes), so a build stopped part way leaves what a rerun of the same
command needs to take the record up again without decoding it (``imgrec.transforms.resumed``). Both frames
carry TFRecord's checksums; a shard writer copies only the first.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from imgrec.contract import layout, tfrecord
from imgrec.storage.storage import Storage, Writer

SUFFIX = '.spill'
# What a record's facts frame keeps: the fields of its RecordRef but where its frame is, its split and label number
# (the listing's and the labels' now). JSON under one key: an Example's bytes start with a protobuf tag, not '{'.
FACTS = ('source', 'label_text', 'sha256', 'source_size', 'mtime_ns', 'generation', 'ctime_ns', 'inode', 'decisions',
         'perceptual_hash', 'source_width', 'source_height', 'upscaled', 'encoded_sha256')
FACTS_KEY = 'spilled'


def facts_of(record: Any) -> bytes:
    """The facts frame's bytes of ``record`` (a RecordRef): what a rerun needs besides its Example."""
    facts = {name: getattr(record, name) for name in FACTS}
    facts['decisions'] = list(record.decisions or ())
    return json.dumps({FACTS_KEY: facts}, sort_keys=True, separators=(',', ':')).encode()


class SpillFile:
    """Appends frames to a new file, opened at the first append; returns where each one landed."""

    def __init__(self, spill_dir: str, storage: Storage):
        self._spill_dir = spill_dir
        self._storage = storage
        self._stream: Writer | None = None
        self._path = ''
        self._offset = 0

    def append(self, frame: bytes, facts: bytes = b'') -> tuple[str, int, int]:
        """Writes ``frame``, then ``facts`` framed (when given); returns (file, offset, length) of ``frame``."""
        if self._stream is None:
            self._path = layout.join(self._spill_dir, f'{uuid.uuid4().hex}{SUFFIX}')
            self._stream = self._storage.open_write(self._path)
        offset = self._offset
        written = frame + tfrecord.frame(facts) if facts else frame
        self._stream.write(written)
        self._offset += len(written)
        return self._path, offset, len(frame)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
