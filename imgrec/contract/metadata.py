"""The ``dataset.json`` document: what a version holds, written by the build, read by training.

Kept as plain dicts with the field names defined here, so the file stays readable by anything that
reads JSON, and both sides agree on the names.
"""
import json
import typing

from imgrec.contract import features as F, layout

# dataset.json's near_duplicates.mode, and --near_duplicates: group them into one split, report them, or off.
NEAR_DUPLICATE_MODES = ('group', 'report', 'off')
# How near-duplicates are found: the same picture written (exact), or the pixel check of hash neighbours (perceptual).
NEAR_DUPLICATE_CHECKS = ('exact', 'perceptual')
# dataset.json's near_duplicates.conflicts, and --near_duplicate_conflicts: what a near-duplicate pair filed under two
# labels gets. keep (the default): both images are written, in one split, and the pair is listed; quarantine: both
# are quarantined (near_duplicate_label_conflict). A heuristic never deletes unless asked.
NEAR_DUPLICATE_CONFLICTS = ('keep', 'quarantine')
# Pairs under two labels listed in dataset.json's near_duplicates.label_conflict_pairs (the first by source):
# near_duplicates.jsonl lists every one.
LISTED_CONFLICT_PAIRS = 100
# 2: each option once. Format 1 also kept the record options (record_options) in ``options`` and the image
# size in ``image``; readers take both (``current``).
FORMAT_VERSION = 2
READABLE_FORMATS = (1, FORMAT_VERSION)
# A split's ArrayRecord shards (--formats ...,array_record): [{'file', 'records', 'bytes'}], one for each
# TFRecord shard, in the same order and holding the same records. Absent when the format was not built.
ARRAY_RECORD_SHARDS = 'array_record_shards'
_SHARD_FIELDS = ('file', 'records', 'bytes')


def add_shard(split: dict, stats: typing.Mapping[str, typing.Any]) -> None:
    """Adds one shard writer's ``stats`` to ``split`` (an entry of build_metadata's ``splits``): its
    TFRecord shard to 'shards' and, when it wrote one, its ArrayRecord shard to ARRAY_RECORD_SHARDS."""
    split['shards'].append({field: stats[field] for field in _SHARD_FIELDS})
    if stats.get(layout.ARRAY_RECORD):
        split.setdefault(ARRAY_RECORD_SHARDS, []).append(
            {field: stats[layout.ARRAY_RECORD][field] for field in _SHARD_FIELDS})


def build_metadata(*, name: str, version: str, created: str, options: dict, record_options: dict,
                   labels: typing.Sequence[str], splits: dict, counts: dict, quarantine: dict,
                   duplicates: dict | None, decoding: dict | None, index: dict | None = None,
                   label_order: str | None = None, refresh: dict | None = None,
                   near_duplicates: dict | None = None, ignored_files: dict | None = None) -> dict:
    """Returns the ``dataset.json`` document, which records each option once.

    ``options`` are the build's options as given; those that shape a record's bytes are recorded only in
    ``record_options`` (with the encoder that applied them, its ``image_size`` the records' [height, width]).

    ``splits`` maps split name -> {'class_counts': {label: n}, 'shards': [{'file', 'records', 'bytes'}],
    'inputs': n, 'quarantined': n, 'duplicates': n} and, with ArrayRecord shards, ARRAY_RECORD_SHARDS
    (``add_shard``); ``formats`` then lists both formats. ``counts`` holds inputs = written + quarantined +
    duplicates, and ignored (non-image files). ``quarantine`` = {'file', 'by_reason'}, ``duplicates`` =
    {'file', 'count'}, ``decoding`` = {'background': [r, g, b], 'decisions': {decision: images},
    'upscaled': written images enlarged to reach the target}; ``near_duplicates`` = {'mode', 'file', 'hash'
    (the perceptual check's; null with the exact check), 'threshold' (bits; null with the exact check, 0 where it
    also compared hashes), 'neighbours' (each image's nearest proposed, the perceptual check), 'check',
    'conflicts', 'groups', 'images', 'pairs', 'pairs_across_splits',
    'pairs_across_labels', 'label_conflict_pairs' ([{'source', 'label', 'split', 'other', 'other_label', 'other_split'}], the
    first LISTED_CONFLICT_PAIRS), 'label_conflicts', 'images_moved', 'largest_group', 'links_cut',
    'conflicts_written_again'} (docs/near-duplicates.md);
    ``index`` = ``imgrec.contract.index.describe(...)``; ``classes`` is derived from the labels and class counts
    (``class_facts``); a refresh reuses records only if ``record_options`` are unchanged; ``label_order``
    how the label order was decided; ``refresh`` = {'previous', 'mode',
    'full_reason', 'reused', 'decoded', 'new', 'changed', 'removed', 'reuse_damaged'} (records of the previous
    version found damaged as they were copied, and decoded again: counted in 'decoded', not 'reused').
    ``ignored_files`` = {extension: {'count', 'example'}} of the files the listing left out
    (``imgrec.imaging.file_types.extension``; they add up to counts['ignored']).
    """
    with_array_record = any(ARRAY_RECORD_SHARDS in info for info in splits.values())
    written = {split: sum(shard['records'] for shard in info['shards']) for split, info in splits.items()}
    shares = split_shares(written, options.get('splits') or {})
    return {
        'format_version': FORMAT_VERSION,
        'name': name,
        'version': version,
        'created': created,
        'options': recorded_options(options, record_options)[0],
        'image': {'channels': F.CHANNELS, 'format': F.IMAGE_FORMAT_JPEG.decode()},
        'features': dict(F.FEATURES),
        'labels': list(labels),
        'classes': class_facts(labels, {split: info['class_counts'] for split, info in splits.items()},
                               len(options.get('splits') or splits)),
        'formats': [layout.TFRECORD] + ([layout.ARRAY_RECORD] if with_array_record else []),
        'splits': {
            split: {
                'num_examples': written[split],
                'num_shards': len(info['shards']),
                **shares[split],
                'inputs': info['inputs'],
                'quarantined': info['quarantined'],
                'duplicates': info['duplicates'],
                'class_counts': {label: info['class_counts'].get(label, 0) for label in labels},
                'shards': info['shards'],
                **({ARRAY_RECORD_SHARDS: info[ARRAY_RECORD_SHARDS]} if ARRAY_RECORD_SHARDS in info else {}),
            }
            for split, info in sorted(splits.items())
        },
        'counts': counts,
        'quarantine': quarantine,
        'duplicates': duplicates or {},
        'decoding': decoding or {},
        'index': index,
        'record_options': record_options,
        'label_order': label_order,
        'refresh': refresh,
        'near_duplicates': near_duplicates,
        'ignored_files': ignored_files or {},
    }


# Recorded options that name a build, not what it builds: they differ between runs of one build.
NAMING_OPTIONS = ('output', 'version', 'name')


def recorded_options(options: typing.Mapping[str, typing.Any],
                     record_options: typing.Mapping[str, typing.Any]) -> tuple[dict, dict]:
    """(``options``, ``record_options``) as dataset.json records them: each option once, those that shape a
    record's bytes in ``record_options`` only."""
    return {key: value for key, value in options.items() if key not in record_options}, dict(record_options)


def identity(document: typing.Mapping[str, typing.Any]) -> dict:
    """What makes two builds one build, from a dataset.json (or ``BuildConfig.recorded()``: its ``options``
    and ``record_options``): every recorded option but those that name it (``NAMING_OPTIONS``), and the
    record options with the encoder that applied them, as JSON gives them back. The one rule for "the same
    build": a refresh that found nothing changed publishes nothing only under it
    (``imgrec.pipelines.refresh``), and a rerun of a published --version is the build that published it
    only under it (``imgrec.storage.publication``)."""
    upgraded = current(dict(document))
    options = {key: value for key, value in (upgraded.get('options') or {}).items() if key not in NAMING_OPTIONS}
    return json.loads(json.dumps({'options': options, 'record_options': upgraded.get('record_options') or {}}))


def split_shares(written: dict[str, int], weights: dict[str, int]) -> dict[str, dict[str, float]]:
    """{split: {'share', 'requested_share'}}: the fraction of the written images each split holds, next
    to the fraction its weight asked for (both rounded to 4 places; 0 when nothing was written)."""
    total, whole = sum(written.values()), sum(weights.values())
    return {split: {'share': round(count / total, 4) if total else 0.0,
                    'requested_share': round(weights.get(split, 0) / whole, 4) if whole else 0.0}
            for split, count in written.items()}


def class_facts(labels: typing.Sequence[str], class_counts: dict[str, dict[str, int]],
                num_splits: int) -> dict[str, list[str]]:
    """{'empty': [class], 'fewer_than_splits': [class]}, in label order: the classes with no image written,
    and those with some but fewer than ``num_splits``, which cannot be in every split. ``class_counts``
    maps split -> {class: images written}. Recorded so that a reader sees them without adding up counts."""
    totals = {label: sum(counts.get(label, 0) for counts in class_counts.values()) for label in labels}
    return {'empty': [label for label in labels if not totals[label]],
            'fewer_than_splits': [label for label in labels if 0 < totals[label] < num_splits]}


def num_splits(metadata: dict) -> int:
    """How many splits were asked for (the options' ``--splits``, else the splits written)."""
    return len((metadata.get('options') or {}).get('splits') or metadata['splits'])


def dumps(metadata: dict) -> str:
    return json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False) + '\n'


def loads(text: str | bytes) -> dict:
    """Parses ``dataset.json`` text of a format this code reads, as ``current`` gives it."""
    metadata = json.loads(text)
    if metadata.get('format_version') not in READABLE_FORMATS:
        raise ValueError(f"unsupported dataset.json format_version {metadata.get('format_version')!r}; "
                         f'this code reads {readable_formats()}')
    return current(metadata)


def readable_formats() -> str:
    """The formats this code reads, for a message: '1 and 2'."""
    return ' and '.join(map(str, READABLE_FORMATS))


def current(metadata: dict) -> dict:
    """A ``dataset.json`` document of a readable format, its fields as this format has them (``format_version``
    stays as written): every reader reads one shape, whichever release published the version."""
    options = metadata.get('options') or {}
    if 'near_duplicates' in options and 'near_duplicate_check' not in options:
        # Built before --near_duplicate_check: every such version found near-duplicates by the pixel check.
        metadata = dict(metadata, options=dict(options, near_duplicate_check=NEAR_DUPLICATE_CHECKS[1]))
    if metadata.get('format_version') != 1:
        return metadata
    options = dict(metadata.get('options') or {})
    recorded = {name: options.pop(name) for name in _FORMAT_1_RECORD_OPTIONS if name in options}
    image = dict(metadata.get('image') or {})
    if 'height' in image and 'width' in image:
        recorded['image_size'] = [image.pop('height'), image.pop('width')]
    recorded.update(metadata.get('record_options') or {})  # the encoder, when it was recorded
    upgraded = dict(metadata, options=options, record_options=recorded)
    if 'image' in metadata:
        upgraded['image'] = image
    return upgraded


# The options format 1 recorded in ``options`` as well as in ``record_options`` (the image size in ``image``).
_FORMAT_1_RECORD_OPTIONS = ('image_size', 'resize', 'jpeg_quality', 'max_pixels', 'min_size')


def image_shape(metadata: dict) -> tuple[int, int, int]:
    """(height, width, channels) of every decoded image in the dataset."""
    height, width = metadata['record_options']['image_size']
    return height, width, metadata['image']['channels']


def resize_mode(metadata: dict) -> str:
    """How the build fitted each image to the size: 'crop', 'pad' or 'stretch' (crop before --resize was)."""
    return metadata['record_options'].get('resize', 'crop')


def num_examples(metadata: dict, split: str) -> int:
    return metadata['splits'][split]['num_examples']


def formats(metadata: dict) -> list[str]:
    """The shard formats a version holds (a version written before --formats holds TFRecord shards only)."""
    return list(metadata.get('formats', [layout.TFRECORD]))


def array_record_shards(metadata: dict, split: str) -> list[dict]:
    """The ArrayRecord shard entries of ``split``: [{'file', 'records', 'bytes'}], [] when none were built."""
    return list(metadata['splits'][split].get(ARRAY_RECORD_SHARDS, []))
