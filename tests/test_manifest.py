"""--manifest input: path,label lines, optional header, relative or absolute paths."""
import os
import shutil

from imgrec.contract import features as F
from tests.conftest import run_build
from tests.contract_checks import check_version
from imgrec.transforms.listing import parse_manifest_line


def test_manifest_lines_parse():
    assert parse_manifest_line('path,label\n', '/m') is None
    assert parse_manifest_line('  \n', '/m') is None
    ref = parse_manifest_line('img/a b.jpg,cat\n', '/m')
    assert (ref.path, ref.source, ref.label) == ('/m/img/a b.jpg', 'img/a b.jpg', 'cat')
    ref = parse_manifest_line('gs://bucket/x.png,dog', '/m')
    assert (ref.path, ref.source) == ('gs://bucket/x.png', 'gs://bucket/x.png')
    assert parse_manifest_line('"with,comma.jpg",cat', '/m').source == 'with,comma.jpg'


def test_build_from_a_manifest(sample_images, tmp_path):
    """Labels come from the manifest, not the folders; sources are the paths as written."""
    flat = tmp_path / 'flat'
    flat.mkdir()
    lines, expected = ['path,label'], {}
    for i, (label, name) in enumerate(sorted((label, name) for label in os.listdir(sample_images)
                                             for name in os.listdir(os.path.join(sample_images, label))
                                             if not name.endswith('.txt'))):
        if i % 3 == 0:
            continue  # only part of the folder is listed
        shutil.copy(os.path.join(sample_images, label, name), flat / name)
        kind = 'round' if label == 'circle' else 'angular'
        path = name if i % 2 else str(flat / name)  # relative to the manifest, or absolute
        lines.append(f'{path},{kind}')
        expected[path] = kind
    manifest = flat / 'list.csv'
    manifest.write_text('\n'.join(lines) + '\n')
    output = run_build(tmp_path / 'out', '--manifest', manifest, '--num_shards', 'train=2,validation=1')
    document, by_split = check_version(output)
    written = {r[F.SOURCE].decode(): r[F.LABEL_TEXT].decode() for records in by_split.values() for r in records}
    assert written == expected
    assert document['labels'] == ['angular', 'round']
    assert document['counts']['inputs'] == len(expected) and document['counts']['quarantined'] == 0


def test_bad_manifest_lines_are_quarantined_not_fatal(sample_images, tmp_path):
    image = os.path.join(sample_images, 'circle', 'circle_00000.jpg')
    manifest = tmp_path / 'list.csv'
    manifest.write_text(f'{image},circle\nno-label-here\n{image},\n')
    output = run_build(tmp_path / 'out', '--manifest', manifest, '--num_shards', 'train=1,validation=1',
                       '--max_error_rate', '1')
    document, _ = check_version(output)
    assert document['counts']['written'] == 1
    assert document['quarantine']['by_reason'] == {'bad_manifest_line': 2}
