"""Labels are plain text: --labels and --manifest files as Excel saves them, class names that cannot be a
line of labels.txt, and a --labels list that does not match the images."""
import codecs
import json
import os
import re

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.contract import layout
from imgrec.pipelines import build_dataset
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from imgrec.transforms.elements import ImageRef
from imgrec.transforms.labels import ResolveLabels, parse_labels_file, unmatched_labels_message
from imgrec.transforms.listing import ListImages

CLASSES = ('circle', 'square')


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('label-images')
    write_images(str(root), 3, classes=CLASSES, **SMALL)
    return root


def _main(*args):
    return build_dataset.main([*map(str, args), '--image_size', '16', '--version', 'v1',
                               '--direct_running_mode', 'in_memory'])


@pytest.mark.parametrize('data', [
    b'circle\nsquare\n',
    b'circle\r\nsquare\r\n',  # Windows
    codecs.BOM_UTF8 + b'circle\r\nsquare\r\n',  # Excel's "CSV UTF-8"
    b'circle\rsquare\r',  # classic Mac
    codecs.BOM_UTF16_LE + 'circle\r\nsquare\r\n'.encode('utf-16-le'),  # Excel's "Unicode Text"
    b'\n  circle \t\n\n square\n\n',
])
def test_label_files_read_as_editors_save_them(data):
    assert parse_labels_file(data) == CLASSES


@pytest.mark.parametrize('data, message', [
    (b'', 'names no class'),
    (codecs.BOM_UTF8 + b'\r\n \r\n', 'names no class'),
    (b'circle\nsquare\ncircle\n', "names the class 'circle' twice"),
    ('caf\u00e9\n'.encode('latin-1'), 'is not UTF-8 (or UTF-16) text'),
    (b'circle\x00\nsquare\n', 'holds a NUL character'),
])
def test_label_files_that_are_no_class_list(data, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_labels_file(data)


def test_a_mismatch_names_both_sides_and_hints_at_case():
    message = unmatched_labels_message(['Circle', 'square', 'star'], ['circle', 'square', 'cross'])
    assert message == ("--labels does not match the images: no images of 'Circle' (found 'circle': names are "
                       "case-sensitive), 'star'; images of classes not in --labels: 'circle', 'cross'; "
                       "give --allow_unknown_labels to drop the classes not listed")
    assert unmatched_labels_message(['square', 'circle'], ['circle', 'square']) is None


@pytest.mark.parametrize('labels, line', [
    ('Circle\nsquare\n', "no images of 'Circle' (found 'circle': names are case-sensitive); "
                         "images of classes not in --labels: 'circle'"),
    ('dog\ncat\n', "no images of 'dog', 'cat'; images of classes not in --labels: 'circle', 'square'"),
    ('square\n', "images of classes not in --labels: 'circle'"),
])
def test_labels_that_do_not_match_the_images_fail_in_one_line(images, tmp_path, capsys, labels, line):
    (tmp_path / 'labels.txt').write_text(labels)
    status = _main('--input', images, '--output', tmp_path / 'out', '--labels', tmp_path / 'labels.txt')
    err = capsys.readouterr().err
    assert status == 1
    (staging,) = [name for name in os.listdir(tmp_path / 'out') if layout.is_staging_name(name)]
    assert err == (f'build-dataset: failed: --labels does not match the images: {line}; '
                   f'give --allow_unknown_labels to drop the classes not listed '
                   f'(report: {tmp_path / "out" / staging / layout.REPORT_HTML})\n')
    assert not (tmp_path / 'out' / layout.LATEST).exists()


def _resolved(refs, **options):
    p = TestPipeline()
    resolved = p | beam.Create(refs) | ResolveLabels(**options)
    return p, resolved


def test_allowed_unknown_labels_are_quarantined_as_before():
    refs = [ImageRef('/i/circle/a.jpg', 'circle/a.jpg', 'circle'), ImageRef('/i/cross/b.jpg', 'cross/b.jpg', 'cross')]
    p, resolved = _resolved(refs, pinned=['square', 'circle'], allow_unknown_labels=True)
    assert_that(resolved['labels'], equal_to([['square', 'circle']]), label='Labels')
    assert_that(resolved['images'] | beam.Map(lambda ref: ref.source), equal_to(['circle/a.jpg']), label='Images')
    assert_that(resolved['rejected'] | beam.Map(lambda r: (r.source, r.reason)),
                equal_to([('cross/b.jpg', 'unknown_label')]), label='Rejected')
    p.run().wait_until_finish()


@pytest.mark.parametrize('name', ['bad\nname', 'bad\rname', 'bad\x00name', 'bad\u2028name', 'bad\x85name'])
def test_a_class_name_that_cannot_be_a_line_is_quarantined(name):
    refs = [ImageRef('/i/ok/a.jpg', 'ok/a.jpg', 'ok'), ImageRef('/i/x/b.jpg', f'{name}/b.jpg', name)]
    p, resolved = _resolved(refs)
    assert_that(resolved['labels'], equal_to([['ok']]), label='Labels')
    assert_that(resolved['rejected'] | beam.Map(lambda r: (r.source, r.reason)),
                equal_to([(f'{name}/b.jpg', 'bad_label')]), label='Rejected')
    p.run().wait_until_finish()


def test_class_folders_named_with_line_breaks_are_quarantined_by_the_build(images, tmp_path, capsys):
    root = tmp_path / 'images'
    write_images(str(root), 3, classes=CLASSES, **SMALL)
    for bad in ('two\nlines', 'carriage\rreturn'):
        (root / bad).mkdir()
        (root / bad / 'a.jpg').write_bytes((root / 'circle' / 'circle_00000.jpg').read_bytes())
    status = _main('--input', root, '--output', tmp_path / 'out', '--max_error_rate', '0.5')
    assert status == 0, capsys.readouterr().err
    version = tmp_path / 'out' / 'v1'
    assert (version / layout.LABELS_TXT).read_text().splitlines() == list(CLASSES)
    quarantined = [json.loads(line) for line in (version / layout.QUARANTINE_JSONL).read_text().splitlines()]
    assert sorted((item['source'], item['reason']) for item in quarantined) == [
        ('carriage\rreturn/a.jpg', 'bad_label'), ('two\nlines/a.jpg', 'bad_label')]
    document = json.loads((version / layout.DATASET_JSON).read_text())
    assert document['labels'] == list(CLASSES)
    assert document['counts']['written'] == 6 and document['counts']['quarantined'] == 2


def _manifest(images, newline, bom=b''):
    lines = ['path,label'] + [f'{path.relative_to(images).as_posix()},{path.parent.name}'
                              for path in sorted(images.rglob('*.*g'))]
    return bom + newline.join(lines).encode() + newline.encode()


def test_an_excel_manifest_with_a_byte_order_mark_and_crlf_builds(images, tmp_path, capsys):
    manifest = images / 'excel.csv'
    manifest.write_bytes(_manifest(images, '\r\n', codecs.BOM_UTF8))
    try:
        status = _main('--manifest', manifest, '--output', tmp_path / 'out')
    finally:
        manifest.unlink()
    assert status == 0, capsys.readouterr().err
    document = json.loads((tmp_path / 'out' / 'v1' / layout.DATASET_JSON).read_text())
    assert document['labels'] == list(CLASSES)  # no phantom class 'label' from the header
    assert document['counts']['written'] == 6 and document['counts']['quarantined'] == 0


def test_a_manifest_with_classic_mac_line_ends_lists_every_line(images, tmp_path):
    manifest = tmp_path / 'mac.csv'
    manifest.write_bytes(_manifest(images, '\r', codecs.BOM_UTF8))
    p = TestPipeline()
    listed = p | ListImages(manifest=str(manifest))
    assert_that(listed['images'] | beam.Map(lambda ref: (ref.source, ref.label)),
                equal_to([(path.relative_to(images).as_posix(), path.parent.name)
                          for path in sorted(images.rglob('*.*g'))]), label='Images')
    assert_that(listed['rejected'], equal_to([]), label='Rejected')
    p.run().wait_until_finish()


def test_an_excel_labels_file_builds(images, tmp_path, capsys):
    (tmp_path / 'labels.txt').write_bytes(codecs.BOM_UTF8 + b'square\r\ncircle\r\n')
    status = _main('--input', images, '--output', tmp_path / 'out', '--labels', tmp_path / 'labels.txt')
    assert status == 0, capsys.readouterr().err
    assert (tmp_path / 'out' / 'v1' / layout.LABELS_TXT).read_text() == 'square\ncircle\n'
