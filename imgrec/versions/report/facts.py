"""What a version's report shows, read from its files: sample and pair thumbnails from the written records
(decoded with the contract's own Example reader: no TensorFlow), image sizes from the record index, the changes
against the previous version, and what pruning kept. Plain values; the sections turn them into HTML.
"""
import base64
import collections
import io

from PIL import Image

from imgrec.contract import features as F, index as index_lib, layout, tfrecord
from imgrec.contract.example import decode_example
from imgrec.imaging import image_ops
from imgrec.storage import storage as storage_lib
from imgrec.versions import shard_reader, version as version_lib

SAMPLES_PER_CLASS = 8


MAX_CLASSES_SHOWN = 40
MAX_SAMPLES = 160  # thumbnails in all: past 20 classes, fewer a class (at least 4), over the first 40 classes


NEAR_DUPLICATE_PAIRS = 8  # pairs shown of each kind: across splits, the farthest and the nearest


PAIR_THUMBNAIL = 48


CONFLICT_THUMBNAIL = 96  # a near-duplicate pair under two labels, side by side in the Warnings
# Near-duplicate pairs under two labels shown side by side in the Warnings (dataset.json lists more).
CONFLICT_PAIRS_SHOWN = 12


MAX_RECORDS_SCANNED = 5000  # stop looking for samples of rare classes after this many records


MAX_SOURCE_BYTES = 20_000_000  # quarantined inputs larger than this get no thumbnail


THUMBNAIL = 64  # longest side, pixels


# A warning when the largest class holds more than this many times the written images of the smallest: past
# it a model sees the smallest classes too rarely to learn them without class weights or more images.
IMBALANCE_RATIO = 10


def data_url(data, mime):
    return f'data:{mime};base64,{base64.b64encode(data).decode()}'


def thumbnail(image, side=THUMBNAIL):
    """A small JPEG data URL of a Pillow image."""
    image = image.convert('RGB')
    image.thumbnail((side, side))
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=75)
    return data_url(out.getvalue(), 'image/jpeg')


def samples_per_class(num_classes):
    """Thumbnails a class: SAMPLES_PER_CLASS, fewer (at least 4) when many classes share MAX_SAMPLES."""
    return max(4, min(SAMPLES_PER_CLASS, MAX_SAMPLES // max(1, min(num_classes, MAX_CLASSES_SHOWN))))


def sample_thumbnails(version, per_class=None, max_records=MAX_RECORDS_SCANNED, storage=None):
    """{label: [(source, thumbnail data URL)]} of the first records of each class shown, in split and shard
    order (read through ``storage``, the job's, when given)."""
    per_class = per_class or samples_per_class(len(version.document['labels']))
    samples: dict[str, list] = collections.defaultdict(list)
    shown = set(version.document['labels'][:MAX_CLASSES_SHOWN])
    wanted, found, scanned = len(shown) * per_class, 0, 0
    for _, _, path in version_lib.shard_paths(version):
        if not storage_lib.given_or_default(path, storage).exists(path):
            continue
        try:
            for serialized in shard_reader.read_shard(path, storage):
                scanned += 1
                values = decode_example(serialized)
                label = values[F.LABEL_TEXT].decode('utf-8', 'replace')
                if label in shown and len(samples[label]) < per_class:
                    samples[label].append((values[F.SOURCE].decode('utf-8', 'replace'),
                                           thumbnail(Image.open(io.BytesIO(values[F.IMAGE_ENCODED])))))
                    found += 1
                if found >= wanted or scanned >= max_records:
                    return samples
        except ValueError:  # a damaged shard: verify-dataset names it; the report shows what it can
            continue
    return samples


def source_path(options, source):
    """Where the quarantined input ``source`` (relative to --input or as the manifest wrote it) is read."""
    if not storage_lib.is_relative(source):
        return source
    if options.get('input'):
        return layout.join(options['input'], source)
    if options.get('manifest'):
        return layout.join(options['manifest'].rsplit('/', 1)[0] if '/' in options['manifest'] else '.', source)
    return None


def source_thumbnail(options, source, max_pixels, storage=None):
    """A thumbnail of a quarantined input when it can still be read and decoded at all, else None; read
    through ``storage`` (the job's, handed on to the input's path) when given."""
    path = source_path(options, source)
    try:
        storage = storage_lib.given_or_default(path, storage) if path is not None else None
        found = storage.stat(path) if storage is not None else None
        if found is None or found.size > MAX_SOURCE_BYTES:
            return None
        image, _ = image_ops.decode(storage.read(path), (THUMBNAIL, THUMBNAIL), 'pad',
                                    max_pixels=max_pixels or image_ops.DEFAULT_MAX_PIXELS)
        return thumbnail(image)
    except Exception:  # pylint: disable=broad-except  (unreadable or undecodable: that is why it is here)
        return None


def published_path(version):
    """Where the version is published: the report may be written while it is still in a staging folder."""
    output = (version.document.get('options') or {}).get('output')
    return layout.join(output, version.document['version']) if output else version.path


def index_parts(version_dir, document, columns, names=None, storage=None):
    """Yields each part of the record index (those ``names``, when given) as a pyarrow Table of the ``columns``
    it has: one small part in memory at a time. Nothing for a version without an index."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    described = document.get('index') or {}
    present = [column for column in columns if column in (described.get('columns') or {})]
    for name in described.get('files') or () if names is None else names:
        path = layout.join(version_dir, name)
        storage = storage_lib.given_or_default(path, storage)
        if not storage.exists(path):
            continue
        data = storage.read(path)
        # ParquetFile, not read_table: the latter imports pyarrow.dataset and pyarrow.compute, 0.3 s of a build.
        yield pq.ParquetFile(io.BytesIO(data)).read(columns=present)


class ImageFacts(collections.namedtuple('ImageFacts', 'widths heights upscaled where')):
    """The written images' source sizes (numpy arrays) and upscaled count, and where the records of some
    sources are."""


def image_facts(version_dir, document, wanted=(), storage=None):
    """ImageFacts from one pass over the index; ``where`` = {source: (shard, offset, length)} of ``wanted``.
    The sizes are held as numpy arrays: 16 bytes an image. Plain numpy and lists, not pyarrow.compute,
    whose import costs a build 0.25 s."""
    import numpy as np

    wanted, widths, heights, upscaled, where = set(wanted), [], [], 0, {}
    columns = (index_lib.SOURCE, index_lib.SOURCE_WIDTH, index_lib.SOURCE_HEIGHT, index_lib.UPSCALED,
               index_lib.SHARD, index_lib.OFFSET, index_lib.LENGTH)
    for part in index_parts(version_dir, document, columns, storage=storage):
        names = set(part.column_names)
        if {index_lib.SOURCE_WIDTH, index_lib.SOURCE_HEIGHT} <= names:
            # Sizes not recorded are nulls, NaN as floats: kept only where both are known.
            part_widths = np.asarray(part[index_lib.SOURCE_WIDTH].to_numpy(), dtype=float)
            part_heights = np.asarray(part[index_lib.SOURCE_HEIGHT].to_numpy(), dtype=float)
            known = ~(np.isnan(part_widths) | np.isnan(part_heights))
            widths.append(part_widths[known].astype(np.int64))
            heights.append(part_heights[known].astype(np.int64))
        if index_lib.UPSCALED in names:
            upscaled += sum(1 for value in part[index_lib.UPSCALED].to_pylist() if value)
        if wanted and index_lib.SOURCE in names:
            sources = part[index_lib.SOURCE].to_pylist()
            rows = [i for i, source in enumerate(sources) if source in wanted]
            if rows:
                shard, offset, length = (part[name].to_pylist() for name in
                                         (index_lib.SHARD, index_lib.OFFSET, index_lib.LENGTH))
                for i in rows:
                    where[sources[i]] = (shard[i], offset[i], length[i])
    join = lambda arrays: np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)  # noqa: E731
    return ImageFacts(join(widths), join(heights), upscaled, where)


def record_thumbnail(version_dir, location, side=PAIR_THUMBNAIL, storage=None):
    """A thumbnail of the written record at ``location`` (shard, offset, length): one ranged read."""
    shard, offset, length = location
    try:
        path = layout.join(version_dir, shard)
        frame = storage_lib.given_or_default(path, storage).read_range(path, offset, offset + length)
        values = decode_example(tfrecord.unframe(frame))
        return thumbnail(Image.open(io.BytesIO(values[F.IMAGE_ENCODED])), side)
    except Exception:  # pylint: disable=broad-except  (a damaged shard: verify-dataset names it)
        return None


def _groups(version_dir, storage=None):
    """The rows of near_duplicates.jsonl a group at a time: the file is sorted by group."""
    rows: list[dict] = []
    for row in version_lib.iter_jsonl(version_dir, layout.NEAR_DUPLICATES_JSONL, storage):
        if rows and row['group'] != rows[0]['group']:
            yield rows
            rows = []
        rows.append(row)
    if rows:
        yield rows


def _keep(kept, item, limit, largest=False):
    """Adds ``item`` to ``kept`` and trims it now and then to the ``limit`` smallest (or largest)."""
    kept.append(item)
    if len(kept) > 4 * limit:
        kept.sort(key=lambda pair: pair[:3], reverse=largest)
        del kept[limit:]


def near_duplicate_pairs(version_dir, limit=NEAR_DUPLICATE_PAIRS, storage=None):
    """(pairs listed, [pair shown]) of near_duplicates.jsonl, read as a stream a group at a time.

    A pair is an image and its nearest (each pair once): (distance, source, source, row, row). Shown: up
    to ``limit`` pairs in two splits (the nearest first), then the ``limit`` farthest apart (where a false
    group would show) and the ``limit`` nearest, each pair once.
    """
    across: list = []
    farthest: list = []
    nearest: list = []
    listed = 0
    for rows in _groups(version_dir, storage):
        by_source = {row['source']: row for row in rows}
        pairs = {}
        for row in rows:
            other = by_source.get(row['nearest'])
            if other is not None:
                first, second = sorted((row, other), key=lambda r: r['source'])
                pairs[(first['source'], second['source'])] = (row['distance'], first['source'], second['source'],
                                                              first, second)
        for pair in pairs.values():
            listed += 1
            if pair[3]['split'] != pair[4]['split']:
                _keep(across, pair, limit)
            _keep(farthest, pair, limit, largest=True)
            _keep(nearest, pair, limit)
    shown, seen = [], set()
    for kept, largest in ((across, False), (farthest, True), (nearest, False)):
        for pair in sorted(kept, key=lambda p: p[:3], reverse=largest)[:limit]:
            if pair[1:3] not in seen:
                seen.add(pair[1:3])
                shown.append(pair)
    return listed, shown


def class_changes(version_dir, document, previous_dir, previous_document, storage=None):
    """{label: [new, changed, removed]} of the written images against the previous version, by their index
    rows: new (a source not in it), changed (other bytes or class), removed (written there, not here).
    Index parts are compared pairwise when both have as many (a source's part is a hash of its name);
    else all rows of both are held."""
    names, before_names = document['index']['files'], previous_document['index']['files']
    batches = (zip(([f] for f in names), ([f] for f in before_names)) if len(names) == len(before_names)
               else [(names, before_names)])
    columns = (index_lib.SOURCE, index_lib.SHA256, index_lib.LABEL)
    changes: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])

    def rows(folder, doc, part_names):
        found = {}
        for part in index_parts(folder, doc, columns, part_names, storage):
            part = part.to_pydict()
            for source, digest, label in zip(part[index_lib.SOURCE], part[index_lib.SHA256], part[index_lib.LABEL]):
                found[source] = (digest, doc['labels'][label])
        return found

    for now_files, then_files in batches:
        now, then = rows(version_dir, document, now_files), rows(previous_dir, previous_document, then_files)
        for source, (digest, label) in now.items():
            old = then.get(source)
            if old is None:
                changes[label][0] += 1
            elif old != (digest, label):
                changes[label][1] += 1
        for source, (_, label) in then.items():
            if source not in now:
                changes[label][2] += 1
    return dict(changes)


class Pruning(collections.namedtuple('Pruning', 'keep_versions versions')):
    """--keep_versions (a run option, not in dataset.json) and the versions its pruning is to delete."""


def pruning_plan(output, version, keep_versions):
    """Pruning of the build about to publish ``version`` into ``output`` (an ``Output``): the versions
    ``Output.pruning_plan`` picks; one a live lease then holds is kept."""
    if not keep_versions:
        return Pruning(None, ())
    return Pruning(keep_versions, output.pruning_plan(version, keep_versions))


def conflict_pairs(document):
    """dataset.json's near-duplicate pairs under two labels that were kept (written), the first
    CONFLICT_PAIRS_SHOWN: [{'source', 'label', 'split', 'other', 'other_label', 'other_split'}]."""
    near = document.get('near_duplicates') or {}
    if near.get('conflicts', 'quarantine') == 'quarantine':  # before the rule, or asked: quarantined, not written
        return []
    return list(near.get('label_conflict_pairs') or [])[:CONFLICT_PAIRS_SHOWN]
