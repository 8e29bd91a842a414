"""--manifest input: path,label lines, optional header, relative or absolute paths."""
import json
import os
import shutil

from imgrec.contract import features as F
from tests.conftest import run_build
from tests.contract_checks import check_version
from imgrec.transforms.listing import manifest_records, parse_manifest_line


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


def _hostile_manifest(image_a, image_b):
    """A manifest with good lines and one of each bad kind, as bytes; {line number: (reason, words)} expected."""
    lines = [b'path,label',                                   # 1
             f'{image_a},circle'.encode(),                    # 2: good
             f'{image_b}\0x,circle'.encode(),                 # 3: a NUL
             b'\xff\xfe broken.jpg,circle',                   # 4: not UTF-8
             f'{image_b}'.encode(),                           # 5: no label
             f'{image_b},"circle'.encode(), b'x"',            # 6-7: a quoted label holding a line break
             f'{image_b},"circle\rx"'.encode(),               # 8-9: a CR inside a quoted label (a lone CR ends a line)
             f'{image_b},circ\x07le'.encode(),                # 10: a control character
             f'{image_b},square'.encode()]                    # 11: good
    expected = {3: ('bad_manifest_line', 'NUL'), 4: ('bad_manifest_line', 'UTF-8'),
                5: ('bad_manifest_line', 'field'), 6: ('bad_label', 'line break'), 8: ('bad_label', 'line break'),
                10: ('bad_label', 'control character')}
    return b'\r\n'.join(lines) + b'\n', expected


def _check_hostile(document, quarantine, expected):
    assert document['counts']['written'] == 2, document['counts']
    assert document['labels'] == ['circle', 'square']  # never 'circle' for "circle\nx"
    found = {}
    for item in quarantine:
        number = int(item['message'].split(':', 1)[0].removeprefix('line '))
        found[number] = item
    assert sorted(found) == sorted(expected), quarantine
    for number, (reason, words) in expected.items():
        assert found[number]['reason'] == reason and words in found[number]['message'], found[number]


def test_a_hostile_manifest_quarantines_each_bad_line_with_its_number_and_builds_the_rest(sample_images, tmp_path):
    image_a = os.path.join(sample_images, 'circle', 'circle_00000.jpg')
    image_b = os.path.join(sample_images, 'square', 'square_00001.jpg')
    data, expected = _hostile_manifest(image_a, image_b)
    manifest = tmp_path / 'list.csv'
    manifest.write_bytes(data)
    output = run_build(tmp_path / 'out', '--manifest', manifest, '--num_shards', 'train=1,validation=1',
                       '--max_error_rate', '1', '--version', 'v1')
    document, _ = check_version(output)
    with open(os.path.join(output, 'v1', 'quarantine.jsonl'), encoding='utf-8') as stream:
        quarantine = [json.loads(line) for line in stream]
    _check_hostile(document, quarantine, expected)


def test_manifest_records_join_a_quoted_field_and_stop_at_an_unterminated_quote():
    records = list(manifest_records([b'a.jpg,"x\n', b'y"\n', b'b.jpg,"open\n', b'c.jpg,z\n']))
    assert records[0] == (1, 'a.jpg,"x\ny"', None)
    assert records[1][0] == 3 and records[1][2] is not None  # the quote never closes: that line alone is bad
    assert records[-1] == (4, 'c.jpg,z', None)
