"""A damaged previous version is never trusted (docs/failures.md#a-damaged-previous-version): an unreadable
index part, dataset.json or quarantine.jsonl, or a label number out of range, makes the next build a full one
that reads none of it, said in one line naming the file; never an error. --full reads the previous index only
for the split assignments it keeps, and a damaged one is dealt afresh with --resplit suggested. Locally and on
gs:// (the GCS emulator)."""
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from imgrec.contract import index, layout
from imgrec.pipelines import build_dataset
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import check_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--progress', 'off',
           '--splits', 'train=75,validation=25', '--num_shards', 'train=1,validation=1')


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('previous-damage') / 'images'
    write_images(str(root), 4, png_every=0, **SMALL)
    (root / 'circle' / 'bad.jpg').write_bytes(b'<html>not an image</html>')  # a quarantine.jsonl line
    return root


@pytest.fixture(scope='module')
def published(images, tmp_path_factory):
    output = tmp_path_factory.mktemp('previous-damage-out') / 'out'
    assert _main(images, output, '--version', 'v1', '--max_error_rate', '1')[0] == 0
    return output


def _main(images, output, *extra, capsys=None):
    status = build_dataset.main(['--input', str(images), '--output', str(output), *OPTIONS, *map(str, extra)])
    captured = capsys.readouterr() if capsys else None
    return status, (captured.out + captured.err if captured else "")


def _document(output, version='v1'):
    return json.loads((output / version / layout.DATASET_JSON).read_text())


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _label_out_of_range(path):
    table = pq.read_table(path)
    labels = pa.array([99] * table.num_rows, type=table.schema.field(index.LABEL).type)
    pq.write_table(table.set_column(table.column_names.index(index.LABEL), index.LABEL, labels), path)


def _cut(path):
    path.write_bytes(path.read_bytes()[:-7])


DAMAGES = {
    'truncated index part': (lambda out, doc: _truncate(out / 'v1' / doc['index']['files'][0]), 'is unreadable ('),
    'label out of range': (lambda out, doc: _label_out_of_range(out / 'v1' / doc['index']['files'][0]),
                           'holds label number 99, which labels.txt does not have'),
    'cut quarantine.jsonl': (lambda out, doc: _cut(out / 'v1' / doc['quarantine']['file']), 'quarantine.jsonl'),
    'labels.txt not dataset.json\'s': (lambda out, doc: (out / 'v1' / layout.LABELS_TXT).write_text('x\ny\n'),
                                       'labels.txt does not list the labels its dataset.json does'),
    'garbled dataset.json': (lambda out, doc: (out / 'v1' / layout.DATASET_JSON).write_text('{"format_version": 2, '),
                             'dataset.json of version v1'),
}


@pytest.mark.parametrize('damage', sorted(DAMAGES))
def test_a_refresh_of_a_damaged_version_is_a_full_build_said_in_one_line(damage, images, published, tmp_path,
                                                                         capsys):
    output = tmp_path / 'out'
    shutil.copytree(published, output)
    spoil, words = DAMAGES[damage]
    spoil(output, _document(output))
    capsys.readouterr()
    status, out = _main(images, output, '--version', 'v2', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    [line] = [line for line in out.splitlines() if line.startswith('build-dataset: full build: ')]
    assert words in line and 'v1' in line, line
    document, _ = check_version(str(output))
    assert document['version'] == 'v2' and document['refresh']['mode'] == 'full'
    assert document['counts']['written'] == _document(published)['counts']['written']


def test_full_reads_a_damaged_index_only_to_deal_afresh_and_suggests_resplit(images, published, tmp_path, capsys):
    output = tmp_path / 'out'
    shutil.copytree(published, output)
    _truncate(output / 'v1' / _document(output)['index']['files'][0])
    capsys.readouterr()
    status, out = _main(images, output, '--version', 'v2', '--full', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    [line] = [line for line in out.splitlines() if line.startswith('build-dataset: full build: ')]
    assert line.startswith('build-dataset: full build: --full was given; version v1 cannot be trusted: its index '
                           'part '), line
    assert line.endswith('its images are dealt into splits afresh (pass --resplit to say so)'), line
    check_version(str(output))


def test_a_refresh_on_gcs_of_a_truncated_index_is_a_full_build(gcs_emulator, images, published, capsys):
    bucket = gcs_emulator.create_bucket('previous-damage')
    output = f'{bucket}/out'
    for path in published.rglob('*'):
        if path.is_file():
            gcs_emulator.upload_bytes(f'{output}/{path.relative_to(published).as_posix()}', path.read_bytes())
    part = _document(published)['index']['files'][0]
    data = gcs_emulator.read_bytes(f'{output}/v1/{part}')
    gcs_emulator.upload_bytes(f'{output}/v1/{part}', data[:len(data) // 2])
    gcs_emulator.upload_folder(images, f'{bucket}/images')
    capsys.readouterr()
    status, out = _main(f'{bucket}/images', output, '--version', 'v2', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    assert f'build-dataset: full build: version v1 cannot be trusted: its index part {output}/v1/{part} is ' \
           f'unreadable (' in out, out
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v2\n'


# -- the facts a refresh copies from the index are checked (index.facts_checksum) -----------------------------

def _copy_a_hash(data):
    """The index part ``data`` (bytes) with its first row's perceptual hash and sizes copied from its second row."""
    table = pq.read_table(pa.BufferReader(data))
    rows = table.to_pylist()
    for column in (index.PERCEPTUAL_HASH, index.SOURCE_WIDTH, index.SOURCE_HEIGHT):
        rows[0][column] = rows[1][column]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), sink)
    return sink.getvalue().to_pybytes(), rows[0][index.SOURCE]


FACTS = (index.SOURCE, index.SHA256, index.LABEL, index.SPLIT, index.PERCEPTUAL_HASH, index.SOURCE_WIDTH,
         index.SOURCE_HEIGHT, index.UPSCALED, index.DECISIONS, index.FACTS_CHECKSUM, index.SHARD, index.OFFSET,
         index.LENGTH)


def _index_rows(read, version_dir, document):
    rows = []
    for name in document['index']['files']:
        rows += pq.read_table(pa.BufferReader(read(f'{version_dir}/{name}'))).to_pylist()
    return sorted(tuple(row[column] for column in FACTS) for row in rows)


def test_a_refresh_decodes_again_a_row_whose_facts_were_copied_from_another_and_says_how_many(
        images, published, tmp_path, capsys):
    output = tmp_path / 'out'
    shutil.copytree(published, output)
    part = output / 'v1' / _document(output)['index']['files'][0]
    data, tampered = _copy_a_hash(part.read_bytes())
    part.write_bytes(data)
    from imgrec.versions import verify  # pylint: disable=import-outside-toplevel  # TensorFlow: here only
    capsys.readouterr()
    assert verify.main([str(output / 'v1')]) == 1
    assert f'row of {tampered!r} does not check against its facts_checksum' in capsys.readouterr().err
    status, out = _main(images, output, '--version', 'v2', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    assert '  1 index row of version v1 did not check (their facts were damaged or copied from another row): ' \
           'decoded again' in out, out
    assert 'nothing changed' not in out
    status, out = _main(images, output, '--version', 'v3', '--full', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    read = lambda path: open(path, 'rb').read()  # noqa: E731
    refreshed = _index_rows(read, output / 'v2', _document(output, 'v2'))
    full = _index_rows(read, output / 'v3', _document(output, 'v3'))
    assert refreshed == full  # the refresh's index is --full's, the tampered row's facts included
    assert _document(output, 'v2')['counts'] == _document(output, 'v3')['counts']
    assert tampered in {row[0] for row in refreshed}


def test_a_refresh_on_gcs_decodes_again_a_row_whose_facts_do_not_check(gcs_emulator, images, capsys):
    bucket = gcs_emulator.create_bucket('previous-facts')
    output = f'{bucket}/out'
    gcs_emulator.upload_folder(images, f'{bucket}/images')
    assert _main(f'{bucket}/images', output, '--version', 'v1', '--max_error_rate', '1')[0] == 0
    document = json.loads(gcs_emulator.read_bytes(f'{output}/v1/{layout.DATASET_JSON}'))
    part = document['index']['files'][0]
    data, _ = _copy_a_hash(gcs_emulator.read_bytes(f'{output}/v1/{part}'))
    gcs_emulator.upload_bytes(f'{output}/v1/{part}', data)
    capsys.readouterr()
    status, out = _main(f'{bucket}/images', output, '--version', 'v2', '--max_error_rate', '1', capsys=capsys)
    assert status == 0, out
    assert '  1 index row of version v1 did not check (their facts were damaged or copied from another row): ' \
           'decoded again' in out, out
    refreshed = json.loads(gcs_emulator.read_bytes(f'{output}/v2/{layout.DATASET_JSON}'))
    counts = document['counts']
    assert refreshed['refresh']['changed'] == 1
    assert refreshed['refresh']['reused'] == counts['written'] - 1 + counts['quarantined']
