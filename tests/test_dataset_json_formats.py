"""dataset.json records each option once (format 2), and every reader still reads the versions format 1
published: the contract's one reader, training's view of a version, TFDS's metadata, the report, and a
refresh from a format-1 version, which reuses its records."""
import copy
import json
import os
import pathlib

import pytest

from imgrec.contract import layout, metadata, version_ref
from imgrec.versions import tfds_metadata
from imgrec.samples.generate import write_images
from tests.conftest import SMALL, build
from imgrec.training import dataset_version

# Written by the release before format 2 (commit a36e286): 24 images at --image_size 24x32 --resize pad.
FORMAT_1 = pathlib.Path(__file__).parent / 'data' / 'dataset_format_1.json'
RECORD_OPTION_NAMES = ('image_size', 'resize', 'jpeg_quality', 'max_pixels', 'min_size')


def _format_1():
    return json.loads(FORMAT_1.read_text())


# Options added to dataset.json after the release that wrote format 1 (a reader of either format ignores an
# option it does not know, so adding one needs no new format).
OPTIONS_SINCE_FORMAT_1 = {'near_duplicate_conflicts', 'near_duplicate_check'}
# Fields added the same way: a reader of either format ignores one it does not know.
FIELDS_SINCE_FORMAT_1 = {'ignored_files'}


def as_format_1(document):
    """A format-2 document as format 1's writer wrote it: the record options in ``options`` too, the size in
    ``image`` too."""
    old = copy.deepcopy(document)
    old['format_version'] = 1
    record = old['record_options']
    old['options'].update({name: record[name] for name in RECORD_OPTION_NAMES})
    height, width = record['image_size']
    old['image'].update(height=height, width=width)
    return old


def test_the_checked_in_document_is_format_1_as_its_release_wrote_it():
    old = _format_1()
    assert old['format_version'] == 1
    assert old['options']['image_size'] == old['record_options']['image_size'] == [24, 32]
    assert (old['image']['height'], old['image']['width']) == (24, 32)
    assert old['options']['resize'] == old['record_options']['resize'] == 'pad'


def test_a_format_1_document_reads_as_the_current_format():
    old = _format_1()
    read = version_ref.parse_document(FORMAT_1.read_bytes(), str(FORMAT_1))
    assert read['format_version'] == 1  # as written
    assert metadata.image_shape(read) == (24, 32, 3) and metadata.resize_mode(read) == 'pad'
    assert read['image'] == {'channels': 3, 'format': 'JPEG'}
    assert read['record_options'] == old['record_options']
    assert not set(read['options']) & set(read['record_options'])
    # Built before --near_duplicate_check: read as what it was, the pixel check (imgrec.contract.metadata.current).
    assert read['options'] == {name: value for name, value in old['options'].items()
                               if name not in RECORD_OPTION_NAMES} | {'near_duplicate_check': 'perceptual'}
    unchanged = set(old) - {'options', 'image', 'record_options'}
    assert {name: read[name] for name in unchanged} == {name: old[name] for name in unchanged}
    assert metadata.loads(FORMAT_1.read_text()) == read


def test_formats_this_code_does_not_read_are_still_refused():
    for found in (0, metadata.FORMAT_VERSION + 1, '2', None):
        with pytest.raises(version_ref.FormatVersionError, match=f'reads {metadata.readable_formats()} '):
            version_ref.parse_document(json.dumps({'format_version': found}), 'dataset.json')


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('images')
    write_images(str(root), 6, png_every=4, **SMALL)
    return root


@pytest.fixture(scope='module')
def published_as_format_1(images, tmp_path_factory):
    """A build whose dataset.json was then rewritten as format 1's writer wrote it: (output, format-2 document).
    Releases of format 1 hashed every image for the pixel check: so does this build."""
    output = tmp_path_factory.mktemp('format_1_output')
    build(str(images), output, '--version', 'v1', '--image_size', '24x32', '--resize', 'pad',
          '--near_duplicate_check', 'perceptual')
    path = output / 'v1' / layout.DATASET_JSON
    current = json.loads(path.read_text())
    path.write_text(metadata.dumps(as_format_1(current)))
    return output, current


def test_the_old_writer_logic_matches_the_release_that_wrote_format_1(published_as_format_1):
    _, current = published_as_format_1
    assert current['format_version'] == metadata.FORMAT_VERSION
    rewritten, real = as_format_1(current), _format_1()
    assert set(rewritten) - FIELDS_SINCE_FORMAT_1 == set(real)
    for field in ('options', 'image', 'record_options'):
        assert set(rewritten[field]) - OPTIONS_SINCE_FORMAT_1 == set(real[field]), field


def test_every_reader_reads_a_format_1_version_as_the_same_one_in_format_2(published_as_format_1, tmp_path):
    output, current = published_as_format_1
    old = dataset_version.open_version(str(output))
    assert old.metadata['format_version'] == 1
    assert (old.image_shape, old.resize_mode, old.labels) == ((24, 32, 3), 'pad', current['labels'])
    assert tfds_metadata.files(old.metadata) == tfds_metadata.files(current)
    new = tmp_path / 'v1'
    new.mkdir()
    (new / layout.DATASET_JSON).write_text(metadata.dumps(current))
    assert dict(old.metadata, format_version=metadata.FORMAT_VERSION) == \
        dataset_version.open_version(str(new)).metadata


def test_a_refresh_from_a_format_1_version_reuses_its_records(published_as_format_1, images):
    """Last in this file: it adds images to the module's input (a copy would be all changed, by inode)."""
    output, previous = published_as_format_1
    write_images(str(images / 'extra'), 1, seed=99, **SMALL)  # a new class, of images unlike the others
    added = sum(len(files) for _, _, files in os.walk(images / 'extra'))
    published = output / 'v1' / layout.DATASET_JSON  # as a release before --near_duplicate_check wrote it
    document = json.loads(published.read_text())
    assert document['options'].pop('near_duplicate_check') == 'perceptual'
    published.write_text(json.dumps(document))
    build(str(images), output, '--version', 'v2', '--image_size', '24x32', '--resize', 'pad')
    written = json.loads((output / 'v2' / layout.DATASET_JSON).read_text())
    assert written['format_version'] == metadata.FORMAT_VERSION
    assert written['refresh']['mode'] == 'incremental' and written['refresh']['previous'] == 'v1'
    assert written['refresh']['reused'] == previous['counts']['written']
    assert written['refresh']['new'] == written['refresh']['decoded'] == added
    assert (output / layout.LATEST).read_text().strip() == 'v2'
    assert os.path.exists(output / 'v2' / layout.LABELS_TXT)
    # Built before --near_duplicate_check, by the pixel check: the refresh keeps it, not the new default.
    assert written['options']['near_duplicate_check'] == 'perceptual'
