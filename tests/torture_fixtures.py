"""The torture corpus on disk, and the check of every file's fate in a built version (local or downloaded)."""
import collections
import hashlib
import io
import json
import os

import pytest
from PIL import Image

from imgrec.contract import features as F, layout, metadata
from imgrec.contract.reasons import REASONS
from imgrec.imaging import file_types
from imgrec.pipelines import launcher
from imgrec.samples import torture
from imgrec.transforms.splits import split_for

# Max difference per channel between a checked pixel and its expected colour (JPEG at quality 90).
TOLERANCE = 24
SPLITS = (('train', 70), ('validation', 30))
# The corpus options plus a layout with several shards; every torture build uses these. Most of its
# images are one picture in many formats, so they are near-duplicates of each other: they are hashed and
# listed (report), but keep the splits of their names, which the checks below expect.
OPTIONS = (*torture.BUILD_OPTIONS, '--splits', 'train=70,validation=30', '--num_shards', 'train=2,validation=1',
           '--near_duplicates', 'report')


def colour_errors(jpeg, colours):
    """{(x, y): max channel difference} between ``jpeg`` decoded and each expected colour."""
    image = Image.open(io.BytesIO(jpeg)).convert('RGB')
    width, height = image.size
    errors = {}
    for (fx, fy), colour in colours:
        pixel = image.getpixel((min(width - 1, int(fx * width)), min(height - 1, int(fy * height))))
        errors[(fx, fy)] = max(abs(a - b) for a, b in zip(pixel, colour))
    return errors


# Each test module importing a fixture below holds its own copy; this cache makes them share one corpus
# and one build per session.
_SESSION = {}


def build(input_root, output, *extra):
    """Runs the build job on the corpus in this process; returns its PipelineResult."""
    _, result = launcher.run(['--input', input_root, '--output', str(output), *OPTIONS, *extra])
    return result


@pytest.fixture(scope='session')
def torture_corpus(tmp_path_factory):
    """(input folder, {source: Expected}, {source: file bytes}) of the torture corpus."""
    if 'corpus' not in _SESSION:
        root = tmp_path_factory.mktemp('torture')
        cases = torture.corpus()
        expected = torture.write_corpus(str(root))
        _SESSION['corpus'] = str(root), expected, {source: data for source, (data, _) in cases.items()}
    return _SESSION['corpus']


@pytest.fixture(scope='session')
def torture_build(torture_corpus, tmp_path_factory):
    """(output folder, PipelineResult) of the corpus built once, in memory, as version v1."""
    if 'build' not in _SESSION:
        output = tmp_path_factory.mktemp('torture-out')
        result = build(torture_corpus[0], output, '--version', 'v1', '--direct_running_mode', 'in_memory')
        _SESSION['build'] = str(output), result
    return _SESSION['build']


def _jsonl(path):
    with open(path, encoding='utf-8') as stream:
        return [json.loads(line) for line in stream]


def check_every_fate(version_dir, expected, contents):
    """Asserts what happened to each input of the corpus in a built version folder; returns dataset.json."""
    from tests.contract_checks import read_shard  # TensorFlow's parser: imported only when a build is checked

    with open(os.path.join(version_dir, layout.DATASET_JSON), encoding='utf-8') as stream:
        document = metadata.loads(stream.read())
    fates = collections.defaultdict(dict)
    for source, fate in expected.items():
        fates[fate.fate][source] = fate

    records = {}
    for split, info in document['splits'].items():
        for shard in info['shards']:
            for record in read_shard(os.path.join(version_dir, shard['file'])):
                source = record[F.SOURCE].decode()
                assert source not in records, f'{source} written twice'
                records[source] = (split, record)
    assert sorted(records) == sorted(fates[torture.WRITTEN])
    written_in = collections.Counter(split for split, _ in records.values())
    for name, weight in SPLITS:  # the written images are dealt to hold the shares (transforms/splits.py)
        assert abs(written_in[name] - len(records) * weight / sum(w for _, w in SPLITS)) <= max(1, len(records) / 100)
    for source, (split, record) in records.items():
        assert record[F.LABEL_TEXT].decode() == source.split('/', 1)[0]
        assert record[F.SHA256].decode() == hashlib.sha256(contents[source]).hexdigest()
        errors = colour_errors(record[F.IMAGE_ENCODED], expected[source].colours)
        assert max(errors.values()) <= TOLERANCE, (source, errors)

    quarantined = {item['source']: item for item in _jsonl(os.path.join(version_dir, layout.QUARANTINE_JSONL))}
    assert {source: item['reason'] for source, item in quarantined.items()} == {
        source: fate.reason for source, fate in fates[torture.QUARANTINED].items()}
    for source, item in quarantined.items():
        assert item['reason'] in REASONS
        assert item['bytes'] == len(contents[source]) and item['message']
        assert item['split'] == split_for(source, SPLITS)

    duplicates = _jsonl(os.path.join(version_dir, layout.DUPLICATES_JSONL))
    assert {item['source']: item['duplicate_of'] for item in duplicates} == {
        source: fate.duplicate_of for source, fate in fates[torture.DUPLICATE].items()}

    counts = document['counts']
    assert counts == {'inputs': len(expected) - len(fates[torture.IGNORED]), 'ignored': len(fates[torture.IGNORED]),
                      'written': len(records), 'quarantined': len(quarantined), 'duplicates': len(duplicates)}
    assert counts['inputs'] == counts['written'] + counts['quarantined'] + counts['duplicates']
    for split, info in document['splits'].items():
        assert info['inputs'] == info['num_examples'] + info['quarantined'] + info['duplicates']
        assert info['inputs'] == written_in[split] + sum(
            1 for source, fate in expected.items()
            if fate.fate not in (torture.IGNORED, torture.WRITTEN) and split_for(source, SPLITS) == split)
    assert document['quarantine']['by_reason'] == dict(sorted(collections.Counter(
        fate.reason for fate in fates[torture.QUARANTINED].values()).items()))
    decisions = collections.Counter(d for fate in fates[torture.WRITTEN].values() for d in fate.decisions)
    assert {key: n for key, n in document['decoding']['decisions'].items()
            if not key.startswith('draft_scale=')} == dict(decisions)
    assert document['decoding']['background'] == [255, 255, 255]
    ignored = collections.defaultdict(list)
    for source in fates[torture.IGNORED]:
        ignored[file_types.extension(source)].append(source)
    assert document['ignored_files'] == {key: {'count': len(sources), 'example': min(sources)}
                                         for key, sources in ignored.items()}
    return document
