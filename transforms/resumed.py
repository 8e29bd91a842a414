"""A rerun of a build stopped part way takes up the records its spill files hold, checked, instead of decoding
their images again (docs/build.md, "A stopped build").

Every record a build encodes is spilled as two TFRecord frames: its Example, then its facts (the source, its size
and stamp, and what decoding found that the Example does not hold: ``imgrec.storage.spill.facts_of``). A stopped
build's spill files are read whole, frame by frame (``scan``): a record is taken up only when both of its frames
pass their checksums, its facts name its Example (the same source, sha256 and class) and its Example has this
build's image size; then only when the image is listed now as it was (the same size and class, and the same stamp
or, where the stamp moved, the same sha256: ``imgrec.transforms.previous.unchanged``) under the same label number.
Every other image is decoded. A frame cut short by the stop, or damaged, loses only its own record (a damaged
length loses the rest of its file: where the next frame starts is unknown). What is taken up is byte for byte what
decoding would give: the Example bytes depend only on the source's bytes, the record options (the same, or no
resume) and the label.
"""
import json
import struct
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters, features as F
from imgrec.contract.example import decode_example
from imgrec.contract.tfrecord import _masked_crc  # pylint: disable=protected-access  # the framing's own checksum
from imgrec.storage.spill import FACTS, FACTS_KEY
from imgrec.transforms.elements import RecordRef
from imgrec.transforms.previous import source_sha256, unchanged

RESUMED, REFUSED, TO_DECODE = 'resumed', 'refused', 'to_decode'
# Why a spilled record was not taken up (dataset.json's refresh.resumed.refused, the summary).
CUT_SHORT = 'cut_short'            # the file ends inside it: the stop cut it off
DAMAGED = 'damaged'                # a checksum fails, or its Example does not parse
MISMATCHED = 'mismatched'          # its facts do not name its Example or lack one this build keeps, or its size is not this build's
SOURCE_CHANGED = 'source_changed'  # its image is listed now with another size, stamp and sha256
LABEL_CHANGED = 'label_changed'    # its class has another label number now
UNREADABLE = 'unreadable'          # a spill file could not be read (counted once a file)


class Spilled(typing.NamedTuple):
    """A record a stopped build spilled and ``scan`` found whole: its facts, the label number its Example holds,
    and where its Example's frame is (file, offset, length)."""
    facts: dict
    label: int
    payload: tuple


def _frames(stream):
    """(offset, length, data or None when its data checksum fails) of each frame of ``stream``; ends with
    (offset, 0, CUT_SHORT or DAMAGED) where the rest cannot be framed."""
    offset = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            yield offset, 0, CUT_SHORT
            return
        if _masked_crc(header[:8]) != struct.unpack('<I', header[8:])[0]:
            yield offset, 0, DAMAGED
            return
        (length,) = struct.unpack('<Q', header[:8])
        data, footer = stream.read(length), stream.read(4)
        if len(data) < length or len(footer) < 4:
            yield offset, 0, CUT_SHORT
            return
        yield offset, length + 16, data if _masked_crc(data) == struct.unpack('<I', footer)[0] else None
        offset += length + 16


def scan(stream, path, image_size):
    """Yields (source, Spilled) for each whole record of the spill file ``path`` read from ``stream``, and the
    reason (a str) for each record refused; ``image_size``: this build's (height, width)."""
    pending = None  # (offset, length, the Example's values) of an Example frame that waits for its facts
    orphan = False  # the next frame is the facts of a refused Example: skipped
    for offset, length, data in _frames(stream):
        if isinstance(data, str):  # the end: nothing more can be framed
            if pending is not None or not orphan:
                yield data
            return
        if pending is None:
            if orphan or (data is not None and data[:1] == b'{'):
                orphan = False
                continue
            try:
                values = decode_example(data) if data is not None else None
            except ValueError:
                values = None
            if values is None:
                yield DAMAGED
                orphan = True
                continue
            pending = (offset, length, values)
            continue
        (example_offset, example_length, values), pending = pending, None
        if data is None:
            yield DAMAGED
            continue
        try:
            facts = json.loads(data)[FACTS_KEY]
        except (ValueError, KeyError, TypeError):
            yield MISMATCHED
            continue
        if (not isinstance(facts, dict) or not set(FACTS) <= set(facts)  # a version that recorded fewer facts
                or values.get(F.SOURCE) != str(facts.get('source')).encode()
                or values.get(F.SHA256) != str(facts.get('sha256')).encode()
                or values.get(F.LABEL_TEXT) != str(facts.get('label_text')).encode()
                or (values.get(F.IMAGE_HEIGHT), values.get(F.IMAGE_WIDTH)) != tuple(image_size)):
            yield MISMATCHED
            continue
        yield facts['source'], Spilled(facts, values.get(F.LABEL), (path, example_offset, example_length))
    if pending is not None:
        yield CUT_SHORT


class _ScanFn(beam.DoFn):
    def __init__(self, image_size, storage):
        self._image_size = image_size
        self._storage = storage

    def process(self, path):
        try:
            with self._storage.open_read(path) as stream:
                found = list(scan(stream, path, self._image_size))
        except Exception:  # pylint: disable=broad-except  # gone or forbidden: its images are decoded
            yield beam.pvalue.TaggedOutput(REFUSED, UNREADABLE)
            return
        for item in found:
            yield beam.pvalue.TaggedOutput(REFUSED, item) if isinstance(item, str) else item


class ReadStopped(beam.PTransform):
    """PBegin -> {'records': (source, Spilled), 'refused': reason}: the records of ``spill_files`` (a stopped
    build's) whole, and why each other one was refused. ``image_size``: this build's."""

    def __init__(self, spill_files, image_size, storage):
        super().__init__()
        self._files = sorted(spill_files)
        self._image_size = tuple(image_size)
        self._storage = storage

    def expand(self, pbegin):
        found = (pbegin
                 | 'SpillFiles' >> beam.Create(self._files)
                 | 'Spread' >> beam.Reshuffle()
                 | 'Scan' >> beam.ParDo(_ScanFn(self._image_size, self._storage)).with_outputs(REFUSED,
                                                                                               main='records'))
        return {'records': found['records'], REFUSED: found[REFUSED]}


class _TakeUpFn(beam.DoFn):
    def __init__(self, storage):
        self._storage = storage  # reads a source whose stamp moved (its sha256 decides)
        self.resumed = Metrics.counter(*counters.IMAGES_RESUMED)
        self._labels = self._index_of = None

    def process(self, grouped, labels):
        if labels is not self._labels:  # the side input is the same object for a whole bundle
            self._labels, self._index_of = labels, {label: i for i, label in enumerate(labels)}
        _, joined = grouped
        listed, spilled = list(joined['listed']), sorted(joined['spilled'], key=lambda found: found.payload)
        if len(listed) != 1 or not spilled:  # not spilled, or listed twice (a manifest): decoded, as a refresh does
            yield from listed
            return
        ref, found = listed[0], spilled[0]
        facts = found.facts
        assert self._index_of is not None  # set above from the side input
        if facts['label_text'] != ref.label or found.label != self._index_of.get(ref.label):
            yield beam.pvalue.TaggedOutput(REFUSED, LABEL_CHANGED)
            yield ref
            return
        was = {'size': facts['source_size'], 'label': facts['label_text'], 'sha256': facts['sha256'],
               'stamp': (facts['mtime_ns'], facts['ctime_ns'], facts['inode'], facts['generation'])}
        if not unchanged(ref, was, lambda ref: source_sha256(self._storage, ref.path)):
            yield beam.pvalue.TaggedOutput(REFUSED, SOURCE_CHANGED)
            yield ref
            return
        path, offset, length = found.payload
        self.resumed.inc()
        yield beam.pvalue.TaggedOutput(RESUMED, RecordRef(
            source=ref.source, path=ref.path, label_text=ref.label, split=ref.split, label=found.label,
            sha256=facts['sha256'], source_size=facts['source_size'], mtime_ns=ref.mtime_ns,
            generation=ref.generation, decisions=tuple(facts['decisions']), payload_file=path, payload_offset=offset,
            payload_length=length, perceptual_hash=facts['perceptual_hash'], source_width=facts['source_width'],
            source_height=facts['source_height'], upscaled=facts['upscaled'], ctime_ns=ref.ctime_ns, inode=ref.inode,
            encoded_sha256=facts['encoded_sha256']))


def _counted(found):
    """{'images': resumed, 'refused': {reason: records}} of the (kind, count) sums ``found``."""
    refused = {kind.split(':', 1)[1]: count for kind, count in sorted(found.items()) if kind.startswith('refused:')}
    return {'images': found.get(RESUMED, 0), 'refused': refused}


class TakeUp(beam.PTransform):
    """ImageRef (to decode) -> {'to_decode': ImageRef, 'resumed': RecordRef, 'counts': one
    {'images': n, 'refused': {reason: n}} dict}: the images a stopped build spilled whole and that are listed now
    as they were are taken up from its spill files (``stopped``: ReadStopped's output), the rest decoded.
    ``labels``: the singleton side input of the class list; ``storage`` hands on each source's (``for_path``)."""

    def __init__(self, stopped, labels, storage):
        super().__init__()
        self._stopped = stopped
        self._labels = labels
        self._storage = storage

    def expand(self, images):
        listed = images | 'KeyBySource' >> beam.Map(lambda ref: (ref.source, ref))
        matched = ({'listed': listed, 'spilled': self._stopped['records']}
                   | 'JoinBySource' >> beam.CoGroupByKey()
                   | 'Match' >> beam.ParDo(_TakeUpFn(self._storage), self._labels).with_outputs(
                       RESUMED, REFUSED, main=TO_DECODE))
        counts = ((matched[RESUMED] | 'CountResumed' >> beam.Map(lambda _: (RESUMED, 1)),
                   (matched[REFUSED], self._stopped[REFUSED]) | 'AllRefused' >> beam.Flatten()
                   | 'CountRefused' >> beam.Map(lambda reason: (f'refused:{reason}', 1)))
                  | 'AllCounts' >> beam.Flatten()
                  | 'Sum' >> beam.CombinePerKey(sum)
                  | 'AsDict' >> beam.combiners.ToDict()
                  | 'Counted' >> beam.Map(_counted))
        return {TO_DECODE: matched[TO_DECODE], RESUMED: matched[RESUMED], 'counts': counts}
