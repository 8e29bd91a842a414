"""File names inside an output folder (local path or ``gs://`` prefix).

<output>/LATEST                       name of the newest complete version, written last
<output>/<version>/dataset.json       metadata (imgrec.contract.metadata)
<output>/<version>/labels.txt         one class name a line; line number = label
<output>/<version>/quarantine.jsonl   inputs that could not be used, with a reason, one JSON object a line
<output>/<version>/duplicates.jsonl   inputs not written because the same bytes were, one JSON object a line
<output>/<version>/near_duplicates.jsonl   written images with a near-duplicate, and their group, one a line
<output>/<version>/{split}-{index:05d}-of-{count:05d}.tfrecord
<output>/<version>/{split}-{index:05d}-of-{count:05d}.array_record   with --formats tfrecord,array_record: the
                                      same records in the same order (docs/array-record.md)
<output>/<version>/index/part-{index:05d}-of-{count:05d}.parquet   record index (imgrec.contract.index)
<output>/<version>/report.html        the build report: one self-contained page (imgrec.versions.report)
<output>/<version>/dataset_info.json, features.json, image.class.label.labels.txt
                                      TFDS's metadata, so tfds.builder_from_directory reads the version
<output>/<tfds name>/<semantic version>/dataset_info.json, features.json, image.class.label.labels.txt
                                      local outputs: a published version's view, the same metadata numbered
                                      one above the views before (version_ref.next_semantic_version), its
                                      shard names leading to ../../<version>/, so tfds.load(NAME,
                                      data_dir=OUT) finds the newest by name (docs/versions.md)

A build writes its version under a staging name, ``<version>.incomplete-<build id>``, which holds the
spill files (``spill/``: encoded records before they are dealt into shards) too; publishing removes the
spill files and moves the staging folder to ``<version>``, then LATEST. Readers follow LATEST, so they
never see a staging folder.
A build that fails leaves its staging folder with ``report.html`` (the failed build's report) and
``build_failure.json`` (what the failing step counted, for that report: imgrec.versions.failed_build).

<output>/_leases/<kind>-<id>.json     who is using what now (docs/publication.md): a build its staging
                                      folder, a reader (training) or a pruning its version. Never a version.
"""
import re

LATEST = 'LATEST'
DATASET_JSON = 'dataset.json'
LABELS_TXT = 'labels.txt'
QUARANTINE_JSONL = 'quarantine.jsonl'
DUPLICATES_JSONL = 'duplicates.jsonl'
NEAR_DUPLICATES_JSONL = 'near_duplicates.jsonl'
VERSION_FORMAT = '%Y%m%dT%H%M%SZ'
INDEX_DIR = 'index'
SPILL_DIR = 'spill'
STAGING_MARK = '.incomplete-'
REPORT_HTML = 'report.html'
REPORT_STATE_JSON = 'report.json'  # what a re-render of report.html shows again: build time, pruning
BUILD_FAILURE_JSON = 'build_failure.json'  # in a failed build's staging folder only
# The folder of lease objects (imgrec.storage.leases), and their kinds.
LEASES_DIR = '_leases'
# The most shards a split may have (a shard's name counts them in five digits).
MAX_SHARDS = 10_000
BUILD_LEASE, READER_LEASE, PRUNE_LEASE = 'build', 'reader', 'prune'
LEASE_KINDS = (BUILD_LEASE, READER_LEASE, PRUNE_LEASE)
_LEASE_NAME = re.compile(r'^(?P<kind>[a-z]+)-(?P<id>[A-Za-z0-9_]+)\.json$')
TFDS_DATASET_INFO = 'dataset_info.json'
TFDS_FEATURES = 'features.json'
# TFDS by name reads <output>/<tfds name>/<semantic version>/; the view's shard template starts with this.
TFDS_VIEW_TO_VERSION = '../../{version}/'

# Shard file formats (--formats), each the suffix of its shard files. TFRecord shards are always written:
# the record index, a refresh and training read them; ArrayRecord shards hold the same records besides.
TFRECORD = 'tfrecord'
ARRAY_RECORD = 'array_record'
FORMATS = (TFRECORD, ARRAY_RECORD)

_SHARD_NAME = re.compile(r'^(?P<split>[A-Za-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.tfrecord$')
SPLIT_NAME = re.compile(r'^[A-Za-z0-9_]+$')


def join(base, *parts):
    """Joins with '/', which both local paths and ``gs://`` URLs accept."""
    return '/'.join([base.rstrip('/')] + [p.strip('/') for p in parts])


def shard_file_name(split, index, count, file_format=TFRECORD):
    return f'{split}-{index:05d}-of-{count:05d}.{file_format}'


def array_record_file_name(shard_file):
    """The ArrayRecord shard that holds the records of TFRecord shard ``shard_file`` (a name or path)."""
    return shard_file[:-len(TFRECORD)] + ARRAY_RECORD


def tfds_views_dir(output, tfds_name):
    """The folder of the views TFDS reads as ``tfds.load(tfds_name, data_dir=output)``, one a semantic
    version."""
    return join(output, tfds_name)


def tfds_view_version(shard_template):
    """The version folder a view's shard template (``TFDS_VIEW_TO_VERSION`` + names) leads to, or None."""
    prefix = TFDS_VIEW_TO_VERSION.partition('{version}')[0]
    if not shard_template.startswith(prefix):
        return None
    version, slash, _ = shard_template[len(prefix):].partition('/')
    return version if slash else None


def index_file_name(index, count):
    return f'{INDEX_DIR}/part-{index:05d}-of-{count:05d}.parquet'


def staging_name(version, build_id):
    """The folder a build writes ``version`` into until it publishes it."""
    return f'{version}{STAGING_MARK}{build_id}'


def is_staging_name(name):
    return STAGING_MARK in name


def staging_version(name):
    """The version a staging folder ``name`` (``staging_name``'s) is written for."""
    return name.split(STAGING_MARK, 1)[0]


def staging_build_id(name):
    """The build id in staging folder ``name`` (``staging_name``'s)."""
    return name.split(STAGING_MARK, 1)[1]


def lease_file_name(kind, lease_id):
    """The lease object of ``kind`` and ``lease_id``, relative to the output folder."""
    return f'{LEASES_DIR}/{kind}-{lease_id}.json'


def parse_lease_file_name(name):
    """(kind, id) of a lease object's file name (no folder), or None for other names."""
    match = _LEASE_NAME.match(name)
    if not match or match['kind'] not in LEASE_KINDS:
        return None
    return match['kind'], match['id']


def parse_shard_file_name(name):
    """Returns (split, index, count) of a shard file name, or None for other names."""
    match = _SHARD_NAME.match(name)
    if not match:
        return None
    return match['split'], int(match['index']), int(match['count'])
