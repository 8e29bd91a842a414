"""File names inside an output folder (local path or ``gs://`` prefix).

<output>/LATEST                       name of the newest complete version, written last
<output>/<version>/dataset.json       metadata (contract.metadata)
<output>/<version>/labels.txt         one class name a line; line number = label
<output>/<version>/quarantine.jsonl   inputs that could not be used, with a reason, one JSON object a line
<output>/<version>/duplicates.jsonl   inputs not written because the same bytes were, one JSON object a line
<output>/<version>/{split}-{index:05d}-of-{count:05d}.tfrecord
<output>/<version>/index/part-{index:05d}-of-{count:05d}.parquet   record index (contract.index)
<output>/<version>/report.html        the build report: one self-contained page (imgrec_versions.report)
<output>/<version>/dataset_info.json, features.json, image-class-label.labels.txt
                                      TFDS's metadata, so tfds.builder_from_directory reads the version

A build writes its version under a staging name, ``<version>.incomplete-<build id>``, which holds the
spill files (``spill/``: encoded records before they are dealt into shards) too; publishing removes the
spill files and moves the staging folder to ``<version>``, then LATEST. Readers follow LATEST, so they
never see a staging folder.
"""
import re

LATEST = 'LATEST'
DATASET_JSON = 'dataset.json'
LABELS_TXT = 'labels.txt'
QUARANTINE_JSONL = 'quarantine.jsonl'
DUPLICATES_JSONL = 'duplicates.jsonl'
VERSION_FORMAT = '%Y%m%dT%H%M%SZ'
INDEX_DIR = 'index'
SPILL_DIR = 'spill'
STAGING_MARK = '.incomplete-'
REPORT_HTML = 'report.html'
TFDS_DATASET_INFO = 'dataset_info.json'
TFDS_FEATURES = 'features.json'

_SHARD_NAME = re.compile(r'^(?P<split>[A-Za-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.tfrecord$')
SPLIT_NAME = re.compile(r'^[A-Za-z0-9_]+$')


def join(base, *parts):
    """Joins with '/', which both local paths and ``gs://`` URLs accept."""
    return '/'.join([base.rstrip('/')] + [p.strip('/') for p in parts])


def shard_file_name(split, index, count):
    return f'{split}-{index:05d}-of-{count:05d}.tfrecord'


def index_file_name(index, count):
    return f'{INDEX_DIR}/part-{index:05d}-of-{count:05d}.parquet'


def staging_name(version, build_id):
    """The folder a build writes ``version`` into until it publishes it."""
    return f'{version}{STAGING_MARK}{build_id}'


def is_staging_name(name):
    return STAGING_MARK in name


def parse_shard_file_name(name):
    """Returns (split, index, count) of a shard file name, or None for other names."""
    match = _SHARD_NAME.match(name)
    if not match:
        return None
    return match['split'], int(match['index']), int(match['count'])
