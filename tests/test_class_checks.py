"""Class-level problems are never silent, and the summary tells the truth: real builds (in-memory
DirectRunner) of a tiny input with an empty class folder, a folder of non-image files, a class of one
image, a planted near-duplicate pair and inputs quarantined for four reasons; empty gs:// class folders
on the GCS emulator; an output inside the input refused before anything is written."""
import contextlib
import html
import io
import json
import os
import random
import re
import shutil

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from PIL import Image

from imgrec.contract import layout, metadata
from imgrec.storage import storage
from imgrec.pipelines import build_dataset, preflight
from imgrec.samples.generate import write_images
from imgrec.samples.near_duplicates import draw_photo, make_twin
from tests.chromium import open_page, requires_chromium
from tests.conftest import SMALL
from tests.contract_checks import check_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)
from imgrec.transforms.elements import ClassFolder, ImageRef
from imgrec.transforms.labels import ResolveLabels, unmatched_labels_message

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABELS = ['beach', 'empty', 'forest', 'lonely', 'notes']  # sorted: the empty classes in their place
OPTIONS = ('--image_size', '32', '--splits', 'train=50,validation=50', '--max_error_rate', '1',
           '--min_size', '12', '--progress', 'off', '--direct_running_mode', 'in_memory',
           '--near_duplicate_check', 'perceptual')  # the planted pair is an edited copy


def _photo(path, seed, size=(200, 150)):
    draw_photo(*size, random.Random(seed)).save(path, quality=92)


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    """beach (4 photos and a re-compressed twin of one), forest (4), lonely (1), empty (no file) and notes
    (a text file only); quarantined: a copy under two labels (2), a zero-byte file, a text file named .jpg
    and a tiny image."""
    root = tmp_path_factory.mktemp('classes-input')
    for c, label in enumerate(('beach', 'forest', 'lonely', 'empty', 'notes')):
        os.makedirs(root / label)
        for i in range({'beach': 4, 'forest': 4, 'lonely': 1}.get(label, 0)):
            _photo(root / label / f'img_{i}.jpg', seed=100 * c + i)
    twin, _, quality = make_twin(Image.open(root / 'beach' / 'img_0.jpg').convert('RGB'), 'jpeg', random.Random(7))
    twin.save(root / 'beach' / 'twin_0.jpg', quality=quality)
    (root / 'notes' / 'README.txt').write_text('no image here')
    _photo(root / 'beach' / 'both.jpg', seed=900)
    shutil.copy(root / 'beach' / 'both.jpg', root / 'forest' / 'both.jpg')  # label_conflict, twice
    (root / 'forest' / 'zero.jpg').write_bytes(b'')                          # empty
    (root / 'forest' / 'text.jpg').write_text('not an image')                # not_an_image
    Image.new('RGB', (8, 8), (200, 10, 10)).save(root / 'beach' / 'tiny.png')  # too_small
    return str(root)


def _main(*argv):
    """build-dataset's exit status and what it printed on stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = build_dataset.main([*map(str, argv)])
    return status, out.getvalue()


@pytest.fixture(scope='module')
def builds(images, tmp_path_factory):
    """{near-duplicate mode: (version folder, dataset.json, summary lines)} of one build each."""
    built = {}
    for mode in ('group', 'report', 'off'):
        output = tmp_path_factory.mktemp(f'classes-{mode}')
        status, out = _main('--input', images, '--output', output, '--version', 'v1', '--near_duplicates', mode,
                            *OPTIONS)
        assert status == 0, out
        version_dir = str(output / 'v1')
        with open(os.path.join(version_dir, layout.DATASET_JSON), encoding='utf-8') as stream:
            built[mode] = version_dir, metadata.loads(stream.read()), out.splitlines()
    return built


def test_empty_class_folders_are_classes_in_their_place(builds):
    version_dir, document, _ = builds['group']
    assert document['labels'] == LABELS
    with open(os.path.join(version_dir, layout.LABELS_TXT), encoding='utf-8') as stream:
        assert stream.read().split('\n')[:-1] == LABELS
    for split in document['splits'].values():
        assert split['class_counts']['empty'] == split['class_counts']['notes'] == 0
    assert document['classes'] == {'empty': ['empty', 'notes'], 'fewer_than_splits': ['lonely']}
    check_version(os.path.dirname(version_dir))  # the contract holds with classes of no record


def test_the_summary_says_each_splits_share_next_to_the_share_asked(builds):
    _, document, lines = builds['group']
    written = document['counts']['written']
    assert lines[0].startswith(f'build-dataset: wrote {written} of {document["counts"]["inputs"]} images')
    for name, split in document['splits'].items():
        got = split['num_examples'] / written
        assert (split['share'], split['requested_share']) == (round(got, 4), 0.5)
        assert f"  {name}: {split['num_examples']} examples ({got:.1%}, asked 50.0%) in {split['num_shards']} " \
               'shard(s)' in lines


def _plural(n, noun):
    return f'{n} {noun}' + ('' if n == 1 else 's')


def test_the_summary_says_the_near_duplicate_groups(builds):
    for mode in ('group', 'report'):
        _, document, lines = builds[mode]
        near = document['near_duplicates']
        assert near['groups'] >= 1 and near['largest_group'] >= 2  # the planted pair
        found = (f"  near-duplicates ({mode}): {_plural(near['groups'], 'group')} "
                 f"(largest {_plural(near['largest_group'], 'image')}), ")
        across = f"{_plural(near['pairs_across_labels'], 'pair')} across classes"
        if mode == 'group':
            assert found + (f"{_plural(near['images_moved'], 'image')} moved to keep groups together, "
                            f"{_plural(near['pairs_across_splits'], 'pair')} in two splits, {across} (kept)") in lines
        else:
            assert found + f"{_plural(near['pairs_across_splits'], 'pair')} in two splits, {across}" in lines
    assert '  near-duplicates: not looked for (--near_duplicates off)' in builds['off'][2]


def test_the_summary_names_the_top_quarantine_reasons_and_where_the_list_and_report_are(builds):
    version_dir, document, lines = builds['group']
    assert document['quarantine']['by_reason'] == {'empty': 1, 'label_conflict': 2, 'not_an_image': 1,
                                                   'too_small': 1}
    quarantine = os.path.join(version_dir, layout.QUARANTINE_JSONL)
    assert (f'  quarantined: label_conflict (2), empty (1), not_an_image (1) and 1 more reason; '
            f'every input and why: {quarantine}') in lines
    assert f'  report: {os.path.join(version_dir, layout.REPORT_HTML)}' == lines[-1]
    assert os.path.isfile(quarantine) and os.path.isfile(os.path.join(version_dir, layout.REPORT_HTML))


def test_the_summary_names_empty_classes_and_classes_with_fewer_images_than_splits(builds):
    _, _, lines = builds['group']
    assert "  empty classes (no image written): 'empty', 'notes'" in lines
    assert "  classes with fewer images than the 2 splits: 'lonely' (1)" in lines


def test_the_summary_in_the_docs_is_this_builds(builds):
    """docs/build.md shows the summary of the group build, its folder written OUT/v1."""
    version_dir, _, lines = builds['group']
    page = open(os.path.join(REPO, 'docs', 'build.md'), encoding='utf-8').read()
    shown = page.split('## The summary', 1)[1].split('```\n', 2)[1]
    assert shown.splitlines() == [line.replace(version_dir, 'OUT/v1') for line in lines]


def test_the_report_shows_the_shares_the_groups_and_the_class_problems(builds):
    version_dir, document, _ = builds['group']
    page = _text(open(os.path.join(version_dir, layout.REPORT_HTML), encoding='utf-8').read())
    for name, split in document['splits'].items():
        assert (f"{name}: {split['num_examples']} records ({split['share']:.1%}, asked 50.0%) in "
                f"{split['num_shards']} shards") in page
    assert 'Empty classes (no image written): empty, notes.' in page
    assert 'Classes with fewer images than the 2 splits, so missing from some: lonely' in page
    near = document['near_duplicates']
    assert f"{near['groups']} groups of {near['images']} written images" in page
    assert f"(largest group {near['largest_group']})" in page
    assert f"{near['pairs_across_labels']} across classes; {near['images_moved']} images moved" in page


def _text(page):
    """The page's text, tags dropped and entities decoded, spaces collapsed (none before a comma or stop)."""
    page = re.sub(r'data:[^"]+', '', page)
    return re.sub(r' ([,.;])', r'\1', re.sub(r'\s+', ' ', html.unescape(re.sub(r'<[^>]+>', ' ', page))))


@requires_chromium
def test_the_report_opened_in_chromium_shows_the_shares_and_the_class_problems(builds, tmp_path):
    version_dir, document, _ = builds['group']
    probe = 'JSON.stringify({text: document.body.innerText, problems: document.getElementById("class-problems")' \
            '.innerText})'
    page = open_page(os.path.join(version_dir, layout.REPORT_HTML), probe, str(tmp_path / 'profile'))
    assert page.errors == [] and page.requests == []
    shown = json.loads(page.evaluated)
    text = re.sub(r'\s+', ' ', shown['text'])
    for name, split in document['splits'].items():
        assert f"{name}: {split['num_examples']} records ({split['share']:.1%}, asked 50.0%)" in text
    assert shown['problems'].startswith('Empty classes (no image written): empty, notes.')


def test_an_empty_folder_takes_a_class_by_the_rule_of_any_new_class(tmp_path):
    """Sorted in with the others in a first build; appended by a refresh, which renumbers no class."""
    images = tmp_path / 'images'
    write_images(str(images), 2, classes=('circle', 'square'), **SMALL)
    output = tmp_path / 'out'
    assert _main('--input', images, '--output', output, '--version', 'v1', *OPTIONS)[0] == 0
    os.makedirs(images / 'box')
    status, out = _main('--input', images, '--output', output, '--version', 'v2', *OPTIONS)
    assert status == 0, out
    with open(output / 'v2' / layout.DATASET_JSON, encoding='utf-8') as stream:
        document = metadata.loads(stream.read())
    assert document['labels'] == ['circle', 'square', 'box'] and document['classes']['empty'] == ['box']
    assert document['refresh']['reused'] == 4  # the other classes kept their numbers: every record reused
    status, _ = _main('--input', images, '--output', tmp_path / 'fresh', '--version', 'v1', *OPTIONS)
    with open(tmp_path / 'fresh' / 'v1' / layout.DATASET_JSON, encoding='utf-8') as stream:
        assert metadata.loads(stream.read())['labels'] == ['box', 'circle', 'square']


def test_empty_folders_satisfy_a_pinned_class_and_are_no_unknown_one():
    refs = [ImageRef('p1', 'cat/1.jpg', 'cat'), ClassFolder('dog', '/in/dog'), ClassFolder('eel', '/in/eel')]
    with TestPipeline() as p:
        found = p | 'Found' >> beam.Create(refs) | 'Discover' >> ResolveLabels()
        assert_that(found['labels'], equal_to([['cat', 'dog', 'eel']]), label='Discovered')
        assert_that(found['images'] | 'Sources' >> beam.Map(lambda r: r.source), equal_to(['cat/1.jpg']),
                    label='OnlyImages')
        pinned = p | 'Given' >> beam.Create(refs) | 'Pin' >> ResolveLabels(['dog', 'cat'])
        assert_that(pinned['labels'], equal_to([['dog', 'cat']]), label='Pinned')
    assert unmatched_labels_message(['dog', 'cat'], ['cat'], empty=['dog', 'eel']) is None
    assert unmatched_labels_message(['dog', 'cat'], ['cat']) == \
        "--labels does not match the images: no images of 'dog'; give --allow_unknown_labels to drop the classes " \
        'not listed'


def test_class_facts_are_derived_from_the_labels_and_class_counts():
    counts = {'train': {'a': 3, 'b': 1}, 'validation': {'a': 1}, 'test': {}}
    assert metadata.class_facts(['a', 'b', 'c'], counts, 3) == {'empty': ['c'], 'fewer_than_splits': ['b']}
    assert metadata.class_facts(['a', 'b', 'c'], counts, 1) == {'empty': ['c'], 'fewer_than_splits': []}


@pytest.fixture(scope='module')
def gcs_input(gcs_emulator, tmp_path_factory):
    """gs://.../images with circle and square images, the console's placeholders 'images/' and
    'images/empty/', and 'images/notes/' holding a text file only."""
    local = tmp_path_factory.mktemp('gcs-classes')
    write_images(str(local), 3, classes=('circle', 'square'), **SMALL)
    bucket = gcs_emulator.create_bucket('class-checks')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    for placeholder in ('images/', 'images/empty/'):
        gcs_emulator.upload_bytes(f'{bucket}/{placeholder}', b'')
    gcs_emulator.upload_bytes(f'{bucket}/images/notes/readme.txt', b'no image here')
    return bucket


def test_empty_gcs_class_folders_are_classes(gcs_emulator, gcs_input, tmp_path):
    output = tmp_path / 'out'
    status, out = _main('--input', f'{gcs_input}/images', '--output', output, '--version', 'g1', *OPTIONS)
    assert status == 0, out
    with open(output / 'g1' / layout.DATASET_JSON, encoding='utf-8') as stream:
        document = metadata.loads(stream.read())
    assert document['labels'] == ['circle', 'empty', 'notes', 'square']
    assert document['classes']['empty'] == ['empty', 'notes']
    lines = out.splitlines()
    assert "  empty classes (no image written): 'empty', 'notes'" in lines
    # Nothing quarantined, no class with fewer images than splits: no line about them.
    assert not [line for line in lines if line.startswith(('  quarantined', '  classes with fewer'))]


def _refused(capsys, *argv):
    status = build_dataset.main([*map(str, argv), '--direct_running_mode', 'in_memory'])
    err = capsys.readouterr().err
    assert status == 2 and err.count('\n') == 1, err
    return err.strip()


HINT = 'builds would list their own output as input; give an --output outside the input folder'


def test_an_output_inside_or_equal_to_a_local_input_is_refused_up_front(images, tmp_path, monkeypatch, capsys):
    inside = os.path.join(images, 'datasets')
    assert _refused(capsys, '--input', images, '--output', inside) == \
        f'build-dataset: error: --output {inside} is inside --input {images}: {HINT}'
    assert not os.path.exists(inside)  # refused before the output's probe
    assert _refused(capsys, '--input', images, '--output', images + '/') == \
        f'build-dataset: error: --output {images}/ is the --input folder: {HINT}'
    monkeypatch.chdir(images)  # relative paths, resolved
    assert _refused(capsys, '--input', '.', '--output', f'../{os.path.basename(images)}/beach/out') == \
        f'build-dataset: error: --output ../{os.path.basename(images)}/beach/out is inside --input .: {HINT}'
    link = tmp_path / 'link'
    os.symlink(images, link)  # the same folder through a symlink, both ways
    assert _refused(capsys, '--input', link, '--output', inside).endswith(f'is inside --input {link}: {HINT}')
    assert _refused(capsys, '--input', images, '--output', link).endswith(f'is the --input folder: {HINT}')
    assert not os.path.exists(inside)
    assert not storage.is_inside(images + '-datasets', images)  # a look-alike name is not inside


def test_an_output_inside_or_equal_to_a_gcs_input_is_refused_up_front(gcs_emulator, gcs_input, capsys):
    images = f'{gcs_input}/images'
    assert _refused(capsys, '--input', images, '--output', f'{images}/out') == \
        f'build-dataset: error: --output {images}/out is inside --input {images}: {HINT}'
    assert _refused(capsys, '--input', images + '/', '--output', images).endswith(f'is the --input folder: {HINT}')
    assert _refused(capsys, '--input', gcs_input, '--output', f'{images}/out').endswith(
        f'is inside --input {gcs_input}: {HINT}')
    assert gcs_emulator.list(f'{images}/out') == []  # nothing written, not even a probe
    assert not storage.is_inside(f'{images}-out', images) and not storage.is_inside(images, '/tmp')


def test_a_single_class_is_warned_of_in_the_summary_and_the_report(tmp_path, capsys):
    """One class builds (nothing is wrong with the files), but a classifier learns nothing from it: the
    summary and report.html's Warnings say so (issue 37)."""
    os.makedirs(tmp_path / 'in' / 'cat')
    for i in range(4):
        _photo(tmp_path / 'in' / 'cat' / f'img_{i}.jpg', seed=i, size=(60, 40))
    status = build_dataset.main(['--input', str(tmp_path / 'in'), '--output', str(tmp_path / 'out'),
                                 '--version', 'v1', *OPTIONS])
    out = capsys.readouterr().out
    assert status == 0
    assert "  warning: one class only ('cat'): a classifier learns nothing from it" in out
    page = (tmp_path / 'out' / 'v1' / layout.REPORT_HTML).read_text()
    assert 'id="single-class"' in page and 'One class only, <code>cat</code>' in page
