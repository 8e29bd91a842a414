"""The report's data sections: a real build (in-memory DirectRunner) with a planted near-duplicate pair,
refreshed with a new, a changed and a removed image, shows each section with the build's own numbers; a
build with ArrayRecord shards and imbalanced and tiny classes shows its warnings, its shares against the
shares asked and both shard formats, under a table of contents; and a synthetic version of 600 classes
stays under 1.5 MB."""
import base64
import hashlib
import html
import io
import json
import os
import random
import re
import shutil

import pytest
from PIL import Image

from imgrec.contract import features as F, index, layout, metadata, tfrecord
from imgrec.contract.example import encode_example
from imgrec.storage.output import Output
from imgrec.versions import version as version_lib
from imgrec.versions.report import command as report_command, facts as report_facts, page as report_page, sections as report_sections
from imgrec.samples.near_duplicates import draw_photo, make_twin
from tests.chromium import open_page, requires_chromium
from tests.conftest import build

# A class name that is markup: it must show as text, and nothing in it may run.
MARKUP = '<i>x'
CLASSES = ('beach', MARKUP)
OPTIONS = ('--splits', 'train=50,validation=50', '--progress', 'off', '--near_duplicate_check', 'perceptual')


def _text(page):
    """The page's text, tags dropped and entities decoded, spaces collapsed."""
    page = re.sub(r'data:[^"]+', '', page)
    return re.sub(r'\s+', ' ', html.unescape(re.sub(r'<[^>]+>', ' ', page)))


def _section(page, anchor):
    """The text of the section whose heading has id ``anchor``, up to the next h2."""
    start = page.index('>', page.index(f'id="{anchor}"')) + 1
    end = page.find('<h2', start)
    return _text(page[start:end if end >= 0 else None])


def _photo(path, seed, size=(200, 150)):
    draw_photo(*size, random.Random(seed)).save(path, quality=92)


@pytest.fixture(scope='module')
def refreshed(tmp_path_factory):
    """(v1 folder, v2 folder, the planted pair): 2 classes x 4 photos (one smaller than the target) and a
    re-compressed twin, then a refresh with one image added, one changed and one removed."""
    root = tmp_path_factory.mktemp('planted-input')
    for c, label in enumerate(CLASSES):
        os.makedirs(root / label)
        for i in range(4):
            _photo(root / label / f'img_{i}.jpg', seed=100 * c + i, size=(24, 18) if (c, i) == (1, 3) else (200, 150))
    original = Image.open(root / 'beach' / 'img_0.jpg')
    twin, _, quality = make_twin(original.convert('RGB'), 'jpeg', random.Random(7))
    twin.save(root / 'beach' / 'twin_0.jpg', quality=quality)
    output = tmp_path_factory.mktemp('planted-output')
    build(str(root), output, *OPTIONS, '--version', 'v1')
    _photo(root / 'beach' / 'img_new.jpg', seed=999)
    _photo(root / MARKUP / 'img_1.jpg', seed=555)  # the same name, other bytes
    os.remove(root / MARKUP / 'img_2.jpg')
    build(str(root), output, *OPTIONS, '--version', 'v2', '--keep_versions', '2')
    return str(output / 'v1'), str(output / 'v2'), ('beach/img_0.jpg', 'beach/twin_0.jpg')


def _page(version_dir):
    with open(os.path.join(version_dir, layout.REPORT_HTML), encoding='utf-8') as stream:
        return stream.read()


def _jsonl(version_dir, name):
    return list(version_lib.iter_jsonl(version_dir, name))


def test_the_planted_pair_shows_with_thumbnails_distance_and_what_the_build_did(refreshed):
    v1, _, (original, twin) = refreshed
    page = _page(v1)
    rows = {row['source']: row for row in _jsonl(v1, layout.NEAR_DUPLICATES_JSONL)}
    assert {original, twin} <= set(rows), 'the planted pair was not grouped'
    summary = metadata.loads(open(os.path.join(v1, layout.DATASET_JSON), encoding='utf-8').read())['near_duplicates']
    section = _section(page, 'near-duplicates')
    assert f"{summary['groups']} groups of {summary['images']} written images" in section
    distance = rows[twin]['distance'] if rows[twin]['nearest'] == original else rows[original]['distance']
    assert re.search(rf'{re.escape(original)} {re.escape(twin)} {distance} beach one group, in '
                     rf'{rows[original]["split"]}', section), section
    pair_images = re.findall(r'<img src="data:image/jpeg;base64,([^"]+)" alt="([^"]+)" title="[^"]*" class="pair"',
                             page)
    assert {alt for _, alt in pair_images} >= {original, twin}
    for data, _ in pair_images:
        assert max(Image.open(io.BytesIO(base64.b64decode(data))).size) <= report_facts.PAIR_THUMBNAIL
    assert f'href="{layout.NEAR_DUPLICATES_JSONL}"' in page


def test_sizes_upscaled_and_the_split_class_table_have_the_builds_numbers(refreshed):
    v1, _, _ = refreshed
    page = _page(v1)
    document = metadata.loads(open(os.path.join(v1, layout.DATASET_JSON), encoding='utf-8').read())
    sizes = _section(page, 'input-sizes')
    assert sizes.startswith(f'Input sizes {document["decoding"]["upscaled"]} of {document["counts"]["written"]} '
                            'written images were upscaled')
    assert document['decoding']['upscaled'] == 1  # the 24x18 photo, under the 32x32 target
    # The photos and the twin are 200x150, one 24x18: smallest, median and largest.
    assert 'width 24 200 200 height 18 150 150 shorter side 18 150 150' in sizes
    assert 'aspect ratio (width / height) 1.33 1.33 1.33' in sizes
    table = _section(page, 'split-class')
    splits = list(document['splits'])
    for label in CLASSES:
        counts = [document['splits'][s]['class_counts'][label] for s in splits]
        assert f'{label} {" ".join(map(str, counts))} {sum(counts)}' in table
    assert f'all classes {" ".join(str(document["splits"][s]["num_examples"]) for s in splits)} ' \
           f'{document["counts"]["written"]}' in table
    assert document['classes'] == {'empty': [], 'fewer_than_splits': []} and 'id="class-problems"' not in page
    for split in splits:  # each class's count on its bar, in class order
        chart = next(svg for svg in _svgs(page) if f'{split}: records per class' in svg)
        texts = re.findall(r'<text[^>]*>([^<]*)</text>', chart)
        counts = [str(document['splits'][split]['class_counts'][label]) for label in document['labels']]
        assert any(texts[i:i + len(counts)] == counts for i in range(len(texts))), (counts, texts)


def _svgs(page):
    """The charts, SVG with text as text."""
    return [base64.b64decode(data).decode() for data in re.findall(r'data:image/svg\+xml;base64,([^"]+)', page)]


def _svg_texts(page):
    return ' '.join(_svgs(page))


def test_changes_per_class_and_the_pruning_of_the_refresh(refreshed):
    _, v2, _ = refreshed
    page = _page(v2)
    refresh = metadata.loads(open(os.path.join(v2, layout.DATASET_JSON), encoding='utf-8').read())['refresh']
    assert (refresh['new'], refresh['changed'], refresh['removed']) == (1, 1, 1)
    changes = _section(page, 'changes')
    assert 'Previous version v1' in changes
    assert 'beach 1 0 0' in changes and f'{MARKUP} 0 1 1' in changes and 'all classes 1 1 1' in changes
    pruning = _section(page, 'pruning')
    assert '--keep_versions 2' in pruning and 'deleted once this one was published: none' in pruning  # v1 is kept
    assert report_page.recorded_pruning(v2) == report_facts.Pruning(2, ())
    assert report_command.main([v2]) == 0 and _page(v2) == page  # a re-render keeps what was recorded


def test_the_versions_pruning_deletes_are_named(tmp_path):
    for age, name in enumerate(('v1', 'v2', 'v3')):
        os.makedirs(tmp_path / name)
        (tmp_path / name / layout.DATASET_JSON).write_text('{}')
        os.utime(tmp_path / name / layout.DATASET_JSON, (1000 + age, 1000 + age))
    assert report_facts.pruning_plan(Output.at(str(tmp_path)), 'v4', 2) == report_facts.Pruning(2, ('v1', 'v2'))
    assert report_facts.pruning_plan(Output.at(str(tmp_path)), 'v4', 3) == report_facts.Pruning(3, ('v1',))
    assert report_facts.pruning_plan(Output.at(str(tmp_path)), 'v4', None) == report_facts.Pruning(None, ())


@requires_chromium
def test_the_refreshed_report_runs_nothing_and_shows_class_names_as_text(refreshed, tmp_path):
    _, v2, _ = refreshed
    probe = ('JSON.stringify({italics: document.querySelectorAll("i").length, scripts: document.scripts.length, '
             'broken: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length, '
             'text: document.body.innerText})')
    page = open_page(os.path.join(v2, layout.REPORT_HTML), probe, str(tmp_path / 'profile'))
    shown = json.loads(page.evaluated)
    assert page.errors == [] and page.requests == []
    assert shown['italics'] == 0 and shown['scripts'] == 0 and shown['broken'] == 0
    assert f'{MARKUP} 0 1 1' in re.sub(r'\s+', ' ', shown['text'])


def synthetic_version(folder, num_classes, shards_per_split=64, pairs=300, seed=0):
    """A version folder as a build of ``num_classes`` classes would leave it, without a build: dataset.json,
    labels.txt, one shard holding one noisy 64x64 JPEG a class (thumbnails that compress worst), its
    index and ``pairs`` near-duplicate pairs. Returns the Version."""
    rng = random.Random(seed)
    labels = [f'class_{i:05d}' for i in range(num_classes)]
    shard = layout.shard_file_name('train', 0, shards_per_split)
    frames, rows = [], []
    offset = 0
    for label_id, label in enumerate(labels):
        for k in range(report_facts.SAMPLES_PER_CLASS if label_id < report_facts.MAX_CLASSES_SHOWN else 1):  # every sample shown
            image = Image.frombytes('RGB', (64, 64), rng.randbytes(64 * 64 * 3))
            encoded = io.BytesIO()
            image.save(encoded, 'JPEG', quality=90)
            source = f'{label}/img_{k}.jpg'
            digest = hashlib.sha256(encoded.getvalue()).hexdigest()
            record = encode_example({
                F.IMAGE_ENCODED: encoded.getvalue(), F.IMAGE_FORMAT: F.IMAGE_FORMAT_JPEG, F.IMAGE_HEIGHT: 64,
                F.IMAGE_WIDTH: 64, F.IMAGE_CHANNELS: 3, F.LABEL: label_id, F.LABEL_TEXT: label, F.SOURCE: source,
                F.SHA256: digest})
            frame = tfrecord.frame(record)
            frames.append(frame)
            width, height = rng.randint(20, 4000), rng.randint(20, 4000)
            rows.append({index.SOURCE: source, index.SHA256: digest, index.SPLIT: 'train', index.LABEL: label_id,
                         index.SHARD: shard, index.OFFSET: offset, index.LENGTH: len(frame),
                         index.SOURCE_WIDTH: width, index.SOURCE_HEIGHT: height,
                         index.UPSCALED: min(width, height) < 64})
            offset += len(frame)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, shard), 'wb') as stream:
        stream.write(b''.join(frames))
    import pyarrow
    import pyarrow.parquet as pq
    part = layout.index_file_name(0, 1)
    os.makedirs(os.path.dirname(os.path.join(folder, part)), exist_ok=True)
    table = pyarrow.Table.from_pylist([{name: row.get(name) for name in index.COLUMNS} for row in rows],
                                      schema=index.schema())
    pq.write_table(table, os.path.join(folder, part))
    near = []
    for p in range(pairs):
        a, b = rows[(2 * p) % len(rows)][index.SOURCE], rows[(2 * p + 1) % len(rows)][index.SOURCE]
        distance = rng.randint(0, 12)
        for source, nearest, split in ((a, b, 'train'), (b, a, 'validation' if p % 7 == 0 else 'train')):
            near.append({'source': source, 'group': min(a, b), 'distance': distance, 'nearest': nearest,
                         'label': a.split('/')[0], 'split': split, 'moved_from': None, 'perceptual_hash': '0' * 16})
    with open(os.path.join(folder, layout.NEAR_DUPLICATES_JSONL), 'w', encoding='utf-8') as stream:
        for row in sorted(near, key=lambda r: (r['group'], r['source'])):
            stream.write(json.dumps(row, sort_keys=True) + '\n')
    splits = {}
    for split, share in (('train', 0.8), ('validation', 0.2)):
        splits[split] = {'class_counts': {label: rng.randint(50, 1300) if split == 'train' else rng.randint(10, 60)
                                          for label in labels},
                         'shards': [{'file': layout.shard_file_name(split, i, shards_per_split),
                                     'records': rng.randint(900, 1100), 'bytes': rng.randint(90, 110) * 10 ** 6}
                                    for i in range(shards_per_split)],
                         'inputs': 0, 'quarantined': 0, 'duplicates': 0}
    document = metadata.build_metadata(
        name='synthetic', version=os.path.basename(folder), created='2026-01-01T00:00:00Z',
        options={'output': os.path.dirname(folder)}, record_options={'image_size': [224, 224]}, labels=labels, splits=splits,
        counts={'inputs': num_classes, 'written': num_classes, 'quarantined': 0, 'duplicates': 0, 'ignored': 0},
        quarantine={'file': layout.QUARANTINE_JSONL, 'by_reason': {}}, duplicates={'file': layout.DUPLICATES_JSONL,
                                                                                   'count': 0},
        decoding={'background': [255, 255, 255], 'decisions': {}, 'upscaled': 0},
        index=index.describe([part], len(rows)),
        refresh={'previous': 'v0', 'mode': 'full', 'full_reason': None, 'new': None, 'changed': None,
                 'removed': None, 'reused': 0, 'decoded': num_classes},
        near_duplicates={'mode': 'group', 'hash': 'dct-sign-64/1', 'threshold': 12, 'bands': 13, 'groups': pairs,
                         'images': 2 * pairs, 'pairs': pairs, 'pairs_across_splits': 0, 'pairs_across_labels': 0,
                         'images_moved': 0, 'largest_group': 2, 'file': layout.NEAR_DUPLICATES_JSONL})
    with open(os.path.join(folder, layout.DATASET_JSON), 'w', encoding='utf-8') as stream:
        stream.write(metadata.dumps(document))
    with open(os.path.join(folder, layout.LABELS_TXT), 'w', encoding='utf-8') as stream:
        stream.write(''.join(f'{label}\n' for label in labels))
    return version_lib.load(folder)


def test_600_classes_stay_under_1_5_mb_and_show_aggregates_and_extremes(tmp_path):
    version = synthetic_version(str(tmp_path / 'v1'), 600)
    page = report_page.render(version, 10.0)
    assert len(page.encode('utf-8')) < 1_500_000
    table = _section(page, 'split-class')
    assert '580 classes between' in table and table.count('class_0') == 2 * report_sections.EXTREMES
    assert 'records per class, 600 classes' in _svg_texts(page)  # a distribution, not 600 bars
    assert 'shard sizes, 64 shards' in _svg_texts(page)
    assert len(re.findall(r'class="sample"', page)) == report_facts.MAX_SAMPLES
    assert 'class="pair"' in page and 'no longer there' in _section(page, 'changes')
    shutil.rmtree(tmp_path / 'v1')


@pytest.fixture(scope='module')
def imbalanced(tmp_path_factory):
    """A build with ArrayRecord shards of three classes: 22 photos, 2 and 1 (fewer than the two splits)."""
    root = tmp_path_factory.mktemp('imbalanced-input')
    for c, (label, count) in enumerate((('many', 22), ('few', 2), ('one', 1))):
        os.makedirs(root / label)
        for i in range(count):
            _photo(root / label / f'img_{i}.jpg', seed=1000 * c + i, size=(60, 45))
    output = tmp_path_factory.mktemp('imbalanced-output')
    build(str(root), output, *OPTIONS, '--near_duplicates', 'off', '--formats', 'tfrecord,array_record',
          '--num_shards', 'train=2,validation=2', '--version', 'v1')
    version_dir = str(output / 'v1')
    return version_dir, metadata.loads(open(os.path.join(version_dir, layout.DATASET_JSON), encoding='utf-8').read())


def _written(document):
    return {label: sum(info['class_counts'][label] for info in document['splits'].values())
            for label in document['labels']}


def test_the_warnings_name_the_imbalanced_and_the_tiny_classes(imbalanced):
    version_dir, document = imbalanced
    written = _written(document)
    assert written == {'many': 22, 'few': 2, 'one': 1}  # every photo written: the warnings below are about them
    warnings = _section(_page(version_dir), 'warnings')
    assert (f'the largest, many ({written["many"]} images), holds {written["many"] / written["one"]:.1f} times '
            f'the smallest, one ({written["one"]}): over {report_facts.IMBALANCE_RATIO} times') in warnings
    assert f'Classes with under 1/{report_facts.IMBALANCE_RATIO} of the largest\'s images: one (1), few (2).' in warnings
    assert document['classes']['fewer_than_splits'] == ['one']
    assert 'Classes with fewer images than the 2 splits, so missing from some: one (1).' in warnings
    for split, info in document['splits'].items():  # 'few' has 2 images for 2 splits: in both, or named
        named = f'Classes with no image in {split}: few (2).' in warnings
        assert named == (info['class_counts']['few'] == 0)


def test_imbalance_is_warned_of_past_the_ratio_only():
    def document(largest, smallest):
        return {'labels': ['a', 'b'], 'classes': {'empty': [], 'fewer_than_splits': []},
                'splits': {'train': {'class_counts': {'a': largest, 'b': smallest}}}}

    ratio = report_facts.IMBALANCE_RATIO
    assert [key for key, _ in report_sections.class_warnings(document(ratio * 3, 3))] == []
    assert [key for key, _ in report_sections.class_warnings(document(ratio * 3 + 1, 3))] == ['imbalance']


def test_the_shares_table_shows_each_splits_share_against_the_one_asked(imbalanced):
    version_dir, document = imbalanced
    shares = _section(_page(version_dir), 'shares')
    weights = document['options']['splits']
    for split, info in document['splits'].items():
        difference = 100 * (info['share'] - info['requested_share'])
        assert (f'{split} {weights[split]} {info["requested_share"]:.1%} {info["share"]:.1%} {difference:+.1f} '
                f'{info["num_examples"]}') in shares, shares
    assert f'{document["counts"]["written"]} written images' in shares
    # The class farthest from its shares, among those with an image for each split, when one strays.
    written, whole = _written(document), sum(weights.values())
    misses = sorted(((abs(document['splits'][split]['class_counts'][label] / written[label] - weight / whole),
                      label, split) for label in document['labels'] if written[label] >= len(weights)
                     for split, weight in weights.items()), key=lambda miss: -miss[0])
    miss, label, split = misses[0]
    got = document['splits'][split]['class_counts'][label] / written[label]
    farthest = f'Per class, the share farthest from the one asked: {label} ({split} {got:.1%}, asked 50.0%)'
    assert (farthest in shares) == (round(miss, 3) > 0), shares


def test_the_shard_tables_list_the_array_record_shards_beside_the_tfrecord_ones(imbalanced):
    version_dir, document = imbalanced
    page = _page(version_dir)
    assert document['formats'] == [layout.TFRECORD, layout.ARRAY_RECORD]
    for split, info in document['splits'].items():
        start = page.index('>', page.index(f'id="shards-{split}"')) + 1
        table = _text(page[start:page.index('</div>', start)])
        assert table.startswith(' shard records bytes ArrayRecord shard records bytes')
        for shard, array in zip(info['shards'], info[metadata.ARRAY_RECORD_SHARDS]):
            assert (f'{shard["file"]} {shard["records"]} {shard["bytes"]} {array["file"]} {array["records"]} '
                    f'{array["bytes"]}') in table
            assert os.path.getsize(os.path.join(version_dir, array['file'])) == array['bytes']


@requires_chromium
def test_the_table_of_contents_links_every_section_and_the_warnings_show(imbalanced, tmp_path):
    version_dir, _ = imbalanced
    probe = ('JSON.stringify({links: Array.from(document.querySelectorAll("nav#contents a")).map(a => {'
             'const target = document.getElementById(a.getAttribute("href").slice(1));'
             'return [a.textContent, target ? target.tagName + ":" + target.textContent : null]; }),'
             'headings: Array.from(document.querySelectorAll("h2")).map(h => h.textContent),'
             'warnings: Array.from(document.querySelectorAll("#class-problems li")).map(li => li.id),'
             'text: document.body.innerText})')
    page = open_page(os.path.join(version_dir, layout.REPORT_HTML), probe, str(tmp_path / 'profile'))
    assert page.errors == [] and page.requests == []
    shown = json.loads(page.evaluated)
    # One link a section, in page order, each to its own heading.
    assert [title for title, _ in shown['links']] == shown['headings']
    assert [target for _, target in shown['links']] == [f'H2:{title}' for title in shown['headings']]
    assert {'Warnings', 'Split shares', 'Splits', 'Quarantine'} <= set(shown['headings'])
    assert shown['warnings'][:2] == ['imbalance', 'tiny-classes']
    assert 'ArrayRecord shard' in shown['text']


def test_the_changes_table_shows_written_and_listed_counts_and_says_why_they_differ(tmp_path):
    """A new input that is quarantined, and a new exact copy that sorts before its original (so the copy is
    written and the original is not): the build lists 2 new and 1 removed, the records have 1 new and 2
    removed. Both rows show, each named, with the line that says why."""
    root, output = tmp_path / 'in', tmp_path / 'out'
    for c, label in enumerate(('a', 'b')):
        os.makedirs(root / label)
        for i in range(4):
            _photo(root / label / f'img_{i}.jpg', seed=10 * c + i, size=(60, 45))
    options = ('--splits', 'train=50,validation=50', '--progress', 'off', '--max_error_rate', '0.5')
    build(str(root), output, *options, '--version', 'v1')
    shutil.copy(root / 'a' / 'img_1.jpg', root / 'a' / 'aaa_copy.jpg')
    (root / 'b' / 'broken.jpg').write_bytes(b'not a jpeg')
    os.remove(root / 'b' / 'img_3.jpg')
    build(str(root), output, *options, '--version', 'v2')
    refresh = metadata.loads((output / 'v2' / layout.DATASET_JSON).read_text(encoding='utf-8'))['refresh']
    assert (refresh['new'], refresh['changed'], refresh['removed']) == (2, 0, 1)
    changes = _section(_page(str(output / 'v2')), 'changes')
    assert 'a 1 0 1' in changes and 'b 0 0 1' in changes
    assert 'all classes 1 0 2 input files listed by the build 2 0 1' in changes
    assert 'Listed and written counts differ' in changes and 'quarantined' in changes
    assert 'Listed and written counts differ' not in _section(_page(str(output / 'v1')), 'changes')


def test_the_options_table_shows_the_record_options_too(refreshed):
    _, v2, _ = refreshed
    options = _section(_page(v2), 'options')
    for option, value in (('image_size', '[32, 32]'), ('resize', '"crop"'), ('jpeg_quality', '90')):
        assert f'{option} {value}' in options
    assert 'splits {"train": 50, "validation": 50}' in options
