"""A refresh: matches the listing with the previous version, so unchanged images are neither read nor
decoded.

Every input of the previous version is known by its source, size and stamp: modification time, inode
change time and inode number (local, as git's index keeps them), or generation (``gs://``); written ones
from the record index, quarantined and duplicate ones from ``quarantine.jsonl`` and ``duplicates.jsonl``.
A listed image whose source, size, stamp and class are the same as then keeps its fate:
- a written record is reused: its frame is copied from the previous shard by offset, and checked as it
  is copied (``ReuseCheck``): a damaged or unreadable frame is decoded again from its source. With
  ``--formats tfrecord,array_record`` it is also unframed into the new ArrayRecord shard: ArrayRecord
  shards are rebuilt from the TFRecord frames, whatever formats the previous version had;
- a quarantined one (for what decoding found) is quarantined again, for the same reason;
- a duplicate goes to Dedupe by its sha256, without bytes; only if it is the copy kept this time (its
  twin is gone) is it decoded (``payload_file`` None).
Every other listed image is new or changed and is decoded. The Example bytes depend only on the source
bytes, the record-shaping options (the same, or there is no refresh) and the label (stable), so what
is reused is byte for byte what decoding would give.
"""
import hashlib
import io
import json
import logging
import typing

import apache_beam as beam
import pyarrow.parquet
from apache_beam.metrics import Metrics

from imgrec.contract import counters, features as F, index as I, layout, tfrecord
from imgrec.contract.example import decode_example
from imgrec.contract.reasons import NEAR_DUPLICATE_CONFLICT, CORRUPT, EMPTY, NOT_AN_IMAGE, TOO_MANY_PIXELS, TOO_SMALL, TRUNCATED, UNSUPPORTED_FORMAT
from imgrec.console.errors import BuildFailed
from imgrec.imaging import image_ops
from imgrec.storage import retries
from imgrec.storage.storage import Storage
from imgrec.transforms.elements import EncodedImage, ImageRef, RecordRef, Rejected, stamp
from imgrec.transforms.examples import to_example

REUSED, REJECTED, TO_DECODE, COUNTS = 'reused', 'rejected', 'to_decode', 'counts'
WRITTEN, QUARANTINED, DUPLICATE = 'written', 'quarantined', 'duplicate'
# What decoding found in the bytes: the same bytes give the same verdict (the options are the same).
# A read error is tried again; a label conflict is a fate of Dedupe, decided again from the sha256s.
DECODING_VERDICTS = frozenset((EMPTY, NOT_AN_IMAGE, UNSUPPORTED_FORMAT, TOO_MANY_PIXELS, TOO_SMALL, TRUNCATED,
                               CORRUPT))


class Fate(typing.NamedTuple):
    """What the previous version did with a source: ``kind`` WRITTEN, QUARANTINED or DUPLICATE, and ``facts``, what
    a refresh compares ('size', 'stamp', 'label') and reuses ('sha256', 'split', 'payload', 'decisions', 'image'
    of a written image; 'reason', 'message' of a quarantined one). ReadPrevious gives (source, Fate)."""
    kind: str
    facts: dict


# RecordRef field <- index column, for what a reused record keeps from the previous version.
_IMAGE_FACTS = (('perceptual_hash', I.PERCEPTUAL_HASH), ('source_width', I.SOURCE_WIDTH),
                ('source_height', I.SOURCE_HEIGHT), ('upscaled', I.UPSCALED), ('encoded_sha256', I.ENCODED_SHA256))


def facts_check(row):
    """Whether the facts a refresh copies from index ``row`` (a dict) are the ones its build wrote: their
    checksum (``index.facts_checksum``, bound to the record's sha256) recomputed. A row of an index older than the
    checksum is taken as it is."""
    recorded = row.get(I.FACTS_CHECKSUM)
    return recorded is None or recorded == I.facts_checksum(row)


# A row whose facts do not check is no fate: its image is listed as changed and decoded again.
_UNTRUSTED_SIZE = -2


def _written(row, version_dir, labels, needed=()):
    """(source, its WRITTEN Fate) of an index ``row``; a row that lacks a fact of ``needed`` (columns this build
    keys its records by: a version built before they were recorded, or reusing records of one) is decoded again."""
    if not facts_check(row):
        _LOG.warning('the index row of %s in %s does not check (its facts were damaged or copied from another '
                     'row): decoding it again', row.get(I.SOURCE), version_dir)
        Metrics.counter(*counters.FACTS_DAMAGED).inc()
        row = dict(row, **{I.SOURCE_SIZE: _UNTRUSTED_SIZE})  # never a listed size: decoded again, as changed
    elif any(row.get(column) is None for column in needed):
        row = dict(row, **{I.SOURCE_SIZE: _UNTRUSTED_SIZE})
    return row[I.SOURCE], Fate(WRITTEN, {
        'size': row[I.SOURCE_SIZE],
        'stamp': (row[I.SOURCE_MTIME_NS], row.get(I.SOURCE_CTIME_NS), row.get(I.SOURCE_INODE), row[I.SOURCE_GENERATION]),
        'label': labels[row[I.LABEL]], 'sha256': row[I.SHA256],
        'decisions': tuple(filter(None, (row[I.DECISIONS] or '').split(','))),
        'payload': (layout.join(version_dir, row[I.SHARD]), row[I.OFFSET], row[I.LENGTH]),
        # Facts of the image, not of its bytes: carried over as they are (null in older indexes).
        'split': row[I.SPLIT], 'image': {name: row.get(column) for name, column in _IMAGE_FACTS}})


def _listed_stamp(item):
    """The stamp of a quarantine.jsonl or duplicates.jsonl line (``elements.stamp``'s order; None where absent)."""
    return item.get('mtime_ns'), item.get('ctime_ns'), item.get('inode'), item.get('generation')


def _quarantined(line, verdicts=DECODING_VERDICTS):
    item = json.loads(line)
    if item.get('reason') not in verdicts:
        return []
    return [(item['source'], Fate(QUARANTINED, {
        'size': item['bytes'], 'stamp': _listed_stamp(item),
        'label': item.get('label'), 'reason': item['reason'], 'message': item['message']}))]


def _duplicate(line):
    item = json.loads(line)
    return item['source'], Fate(DUPLICATE, {
        'size': item['bytes'], 'stamp': _listed_stamp(item),
        'label': item['label'], 'sha256': item['sha256']})


def nothing_changed(counts, reusable, keep_labels, labels):
    """Whether a build would publish what the previous version already is: nothing new, changed or
    removed, and the same labels. ``reusable``: an incremental build with the previous version's options,
    not forced (known before the job runs, so only it and the label order go into the graph, not the
    previous dataset.json)."""
    return (reusable and tuple(labels) == keep_labels
            and counts['new'] == counts['changed'] == counts['removed'] == 0)


class ReadPrevious(beam.PTransform):
    """PBegin -> (source, Fate) for every input of the previous version that had a fate. ``needed``: index columns
    a written record must have to be reused (``_written``)."""

    def __init__(self, version_dir, document, needed=()):
        super().__init__()
        self._needed = tuple(needed)
        self._version_dir = version_dir
        self._files = list(document['index']['files'])
        self._labels = list(document['labels'])
        self._quarantine = document['quarantine']['file']
        self._duplicates = document['duplicates']['file']

    def expand(self, pbegin):
        version_dir, labels = self._version_dir, self._labels
        written = (pbegin
                   | 'IndexFiles' >> beam.Create([layout.join(version_dir, name) for name in self._files])
                   | 'ReadIndex' >> beam.io.ReadAllFromParquet()
                   | 'Written' >> beam.Map(_written, version_dir, labels, self._needed))
        quarantined = (pbegin
                       | 'ReadQuarantine' >> beam.io.ReadFromText(layout.join(version_dir, self._quarantine))
                       | 'Quarantined' >> beam.FlatMap(_quarantined))
        duplicates = (pbegin
                      | 'ReadDuplicates' >> beam.io.ReadFromText(layout.join(version_dir, self._duplicates))
                      | 'Duplicates' >> beam.Map(_duplicate))
        return (written, quarantined, duplicates) | 'AllFates' >> beam.Flatten()


def unchanged(ref, facts, digest=None):
    """Whether listed ``ref`` is the input its previous fate (``facts``) was decided for: the same size and
    class, and the same stamp or, where the stamp moved (a file written again with the same bytes, a
    copy, a checkout), the same sha256 as its record, read and hashed only then (``digest(ref)``, None when
    it cannot be read; without ``digest`` a moved stamp is a change). A quarantine line records no sha256:
    its image is decoded again."""
    if ref.size != facts['size'] or ref.label != facts['label']:
        return False
    if stamp(ref) == tuple(facts['stamp']):
        return True
    return digest is not None and facts.get('sha256') is not None and digest(ref) == facts['sha256']


_CHUNK = 1 << 20


def source_sha256(storage, path):
    """The hex sha256 of the file at ``path`` (through ``storage``, which hands on each path's own: a
    ``Storage.for_path``), read a MiB at a time; None when it cannot be read (it is then decoded, and a
    read error is the decoder's to report)."""
    digest = hashlib.sha256()
    try:
        with storage.for_path(path).open_read(path) as stream:
            for chunk in iter(lambda: stream.read(_CHUNK), b''):
                digest.update(chunk)
    except Exception:  # pylint: disable=broad-except  # missing now, forbidden, retries spent: decode it
        return None
    return digest.hexdigest()


def _conflict_source(line):
    item = json.loads(line)
    return [item['source']] if item.get('reason') == NEAR_DUPLICATE_CONFLICT else []


class PreviousConflicts(beam.PTransform):
    """PBegin -> the sources the previous version quarantined as near-duplicate label conflicts: a refresh
    decides them again (they are not fates, ``DECODING_VERDICTS``) and counts those it writes now."""

    def __init__(self, version_dir, document):
        super().__init__()
        self._path = layout.join(version_dir, document['quarantine']['file'])

    def expand(self, pbegin):
        return (pbegin
                | 'ReadQuarantine' >> beam.io.ReadFromText(self._path)
                | 'NearDuplicateConflicts' >> beam.FlatMap(_conflict_source))


class _MatchFn(beam.DoFn):
    def __init__(self, storage=None):
        self.reused = Metrics.counter(*counters.IMAGES_REUSED)
        self.to_decode = Metrics.counter(*counters.IMAGES_TO_DECODE)
        self._labels = self._index_of = None
        self._storage = storage  # reads a source whose stamp moved (``unchanged``); None: a moved stamp is a change

    def _digest(self, ref):
        return source_sha256(self._storage, ref.path)

    def process(self, grouped, labels):
        if labels is not self._labels:  # the side input is the same object for a whole bundle
            self._labels, self._index_of = labels, {label: i for i, label in enumerate(labels)}
        source, joined = grouped
        listed, previous = list(joined['listed']), list(joined['previous'])
        if not listed:
            yield beam.pvalue.TaggedOutput(COUNTS, ('removed', len(previous)))
            return
        # One listing of the source and one previous fate: the usual case. A manifest that lists a path
        # twice is simply decoded again.
        if len(listed) == 1 and len(previous) == 1 and unchanged(
                listed[0], previous[0].facts, self._digest if self._storage is not None else None):
            ref, (fate, facts) = listed[0], previous[0]
            self.reused.inc()
            yield beam.pvalue.TaggedOutput(COUNTS, ('reused', 1))
            if fate == QUARANTINED:
                yield beam.pvalue.TaggedOutput(REJECTED, Rejected(
                    ref.source, facts['reason'], facts['message'], facts['size'], ref.split, ref.label,
                    ref.mtime_ns, ref.generation, ref.ctime_ns, ref.inode))
                return
            payload = facts.get('payload', (None, 0, 0))
            assert self._index_of is not None  # set above from the side input
            yield beam.pvalue.TaggedOutput(REUSED, RecordRef(
                source=ref.source, path=ref.path, label_text=ref.label, split=ref.split,
                label=self._index_of[ref.label], sha256=facts['sha256'],
                source_size=facts['size'], mtime_ns=ref.mtime_ns, generation=ref.generation,
                decisions=facts.get('decisions', ()), payload_file=payload[0], payload_offset=payload[1],
                payload_length=payload[2], ctime_ns=ref.ctime_ns,
                inode=ref.inode, **facts.get('image', {})))
            return
        yield beam.pvalue.TaggedOutput(COUNTS, ('changed' if previous else 'new', len(listed)))
        for ref in listed:
            self.to_decode.inc()
            yield ref


class MatchPrevious(beam.PTransform):
    """ImageRef (split assigned) -> {'to_decode': ImageRef, 'reused': RecordRef, 'rejected': Rejected,
    'counts': one {'new', 'changed', 'removed', 'reused': n} dict}.

    ``previous`` is ReadPrevious's output; ``labels`` the singleton side input of the class list;
    ``storage`` (a Storage that hands on each source's: ``for_path``) reads the sources whose stamp moved but
    not their size, to reuse those whose bytes did not change either.
    """

    def __init__(self, previous, labels, storage=None):
        super().__init__()
        self._previous = previous
        self._labels = labels
        self._storage = storage

    def expand(self, images):
        listed = images | 'KeyBySource' >> beam.Map(lambda ref: (ref.source, ref))
        matched = ({'listed': listed, 'previous': self._previous}
                   | 'JoinBySource' >> beam.CoGroupByKey()
                   | 'Match' >> beam.ParDo(_MatchFn(self._storage), self._labels).with_outputs(
                       REUSED, REJECTED, COUNTS, main=TO_DECODE))
        counts = (matched[COUNTS]
                  | 'SumCounts' >> beam.CombinePerKey(sum)
                  | 'AsDict' >> beam.combiners.ToDict()
                  | 'AllKinds' >> beam.Map(lambda found: {kind: found.get(kind, 0)
                                                          for kind in ('new', 'changed', 'removed', 'reused')}))
        return {TO_DECODE: matched[TO_DECODE], REUSED: matched[REUSED], REJECTED: matched[REJECTED],
                COUNTS: counts}


_LOG = logging.getLogger(__name__)


class ReuseCheck:
    """Checks each frame a refresh copies from the previous version as the shard writer copies it, and makes
    a damaged one again from its source.

    Checked, before a byte of the frame is written: both TFRecord checksums (of the length and of the
    Example), that the frame is exactly the index row's ``length``, and that its Example is the record the
    row names: the same source, the same sha256 (the index's ``sha256`` and the Example's
    ``image/key/sha256`` are both the hex digest of the source file's bytes), the same label number and
    class name, and this build's image size. A frame that fails, or cannot be read (its shard is missing,
    or ends before it), is decoded again from its source, exactly as a full build decodes it; the writer
    counts it (``reuse_damaged``). Not checked: the JPEG inside a frame whose checksums hold (they cover
    it against damage; only a frame written on purpose with other pixels under the same names passes).
    """

    def __init__(self, previous_dir: str | None, options, storage: Storage, stopped=()):
        # The previous version's folder, and the staging folders of stopped runs of this build (a rerun takes
        # their spilled records up: imgrec.transforms.resumed).
        self._prefixes = tuple(folder.rstrip('/') + '/' for folder in (previous_dir, *stopped) if folder)
        self._options = options  # RecordOptions: the previous version's, or there is no reuse
        self._storage = storage  # hands on the storage of each source (Storage.for_path)

    def copies(self, record):
        """Whether ``record``'s frame lies in the previous version or a stopped run's staging folder (else in this
        build's own spill files)."""
        return record.payload_file is not None and record.payload_file.startswith(self._prefixes)

    def problem(self, record, frame):
        """Why ``frame`` (bytes, or the exception reading them) is not ``record``'s frame; None when it is."""
        if isinstance(frame, Exception):
            return f'cannot read it: {retries.describe(frame)}'
        try:
            values = decode_example(tfrecord.unframe(frame))
        except ValueError as error:  # a checksum, a length, or protobuf bytes that do not parse
            return str(error)
        height, width = self._options.image_size
        expected = {F.SOURCE: record.source.encode(), F.SHA256: record.sha256.encode(), F.LABEL: record.label,
                    F.LABEL_TEXT: record.label_text.encode(), F.IMAGE_HEIGHT: height, F.IMAGE_WIDTH: width}
        wrong = [key for key, value in expected.items() if values.get(key) != value]
        return f"its Example is another record ({', '.join(wrong)} differ)" if wrong else None

    def checked(self, record, frame):
        """(frame to write, whether it was damaged): ``frame`` itself, or the frame decoded again."""
        problem = self.problem(record, frame)
        if problem is None:
            return frame, False
        where = f'{record.payload_file} at offset {record.payload_offset}'
        _LOG.warning('the record of %s in %s is damaged (%s): decoding it again', record.source, where, problem)
        return self.decoded_again(record, f'its record in {where} is damaged ({problem})'), True

    def decoded_again(self, record, why):
        """The frame of ``record`` made from its source, as a full build makes it.

        BuildFailed, one line naming the source, when the source no longer holds the bytes the record was
        made of (its stamp did not change, see docs/reuse.md) or cannot be read or decoded now.
        """
        try:
            data = self._storage.for_path(record.path).read(record.path)
        except Exception as error:  # missing now, forbidden, or retries exhausted: nothing to make it from
            raise BuildFailed(f'cannot decode {record.path} again ({why}): {retries.describe(error)}') from error
        digest = hashlib.sha256(data).hexdigest()
        if digest != record.sha256:
            raise BuildFailed(f'cannot decode {record.path} again ({why}): its bytes changed since the previous '
                              f'version although its size and stamp did not; run again with --full')
        try:
            jpeg, _ = image_ops.decode_resize_encode(data, self._options)
        except image_ops.ImageRejected as rejection:  # decoded once: only another Pillow would refuse it now
            raise BuildFailed(f'cannot decode {record.path} again ({why}): {rejection.message}') from None
        height, width = self._options.image_size
        ref = ImageRef(record.path, record.source, record.label_text, record.split)
        return tfrecord.frame(to_example(EncodedImage(ref, digest, jpeg, height, width), record.label))


def read_fates(version_dir, document, read_bytes, verdicts=DECODING_VERDICTS):
    """(source, Fate) of every input of the previous version that had a fate, as ReadPrevious gives
    them, read here without a pipeline (a refresh that may change nothing, ``imgrec.pipelines.refresh``).

    ``read_bytes(path)`` reads one whole file; the index is read a part at a time. ``verdicts``: the
    quarantine reasons that are fates.
    """
    labels = list(document['labels'])
    for name in document['index']['files']:
        # ParquetFile, not read_table: that loads pyarrow.dataset and pyarrow.compute (a second and more).
        table = pyarrow.parquet.ParquetFile(io.BytesIO(read_bytes(layout.join(version_dir, name)))).read()
        for row in table.to_pylist():
            yield _written(row, version_dir, labels)
    for lines, fates in ((document['quarantine']['file'], lambda line: _quarantined(line, verdicts)),
                         (document['duplicates']['file'], lambda line: [_duplicate(line)])):
        for line in read_bytes(layout.join(version_dir, lines)).decode('utf-8').split('\n'):  # as ReadFromText
            if line.strip():
                yield from fates(line)


def nothing_new_changed_or_removed(listed, fates, digest=None):
    """Whether MatchPrevious would count no image new, changed or removed: ``listed`` (ImageRefs, as the
    listing and ResolveLabels leave them) against ``fates`` (``read_fates``), by ``_MatchFn``'s rule: every
    source listed once, with one fate, of the same size, stamp and class, or of a moved stamp and the same
    bytes (``digest(ref)``: read and hashed only then). Stops at the first difference."""
    previous = {}
    for source, fate in fates:
        if source in previous:  # two fates: _MatchFn decodes it again
            return False
        previous[source] = fate
    for ref in listed:
        fate = previous.pop(ref.source, None)
        if fate is None or not unchanged(ref, fate.facts, digest):  # new, listed twice, or changed
            return False
    return not previous  # else removed
