"""The zoo of styles (imgrec.samples.zoo): deterministic, distinct images of the size asked for, planted
copies that are the edits they claim, and a scorer that counts what issue 39's targets count."""
import io
import json
import os
import random

import numpy as np
import pytest
from PIL import Image

from imgrec.contract import layout
from imgrec.samples import zoo, zoo_edits, zoo_scores
from imgrec.samples.zoo import STYLES

STYLE_NAMES = sorted(STYLES)


def _bytes(image):
    out = io.BytesIO()
    image.save(out, format='PNG')
    return out.getvalue()


def _grey(image, side=32):
    """Mean- and contrast-free grey picture, ``side`` square: two images' dot product is their correlation."""
    grey = np.asarray(image.convert('L').resize((side, side), Image.Resampling.BOX), dtype=np.float64).ravel()
    grey -= grey.mean()
    return grey / (np.linalg.norm(grey) or 1)


def _colours(image):
    return np.asarray(image.convert('RGB').resize((16, 16), Image.Resampling.BOX), dtype=np.float64)


def _drawn(name, per_class, size=None):
    style = STYLES[name]
    return [(label, style.draw(label, index, 0, size or style.size))
            for label in style.classes for index in range(per_class)]


@pytest.mark.parametrize('name', STYLE_NAMES)
def test_every_style_draws_the_same_bytes_from_the_same_seed(name):
    style = STYLES[name]
    label = style.classes[-1]
    first = [_bytes(style.draw(label, index, 7, style.size)) for index in range(3)]
    assert first == [_bytes(style.draw(label, index, 7, style.size)) for index in range(3)]
    assert first != [_bytes(style.draw(label, index, 8, style.size)) for index in range(3)]  # the seed matters


@pytest.mark.parametrize('name', STYLE_NAMES)
def test_the_images_of_a_style_are_distinct(name):
    """No two images alike pixel for pixel, and no two nearly so: grey pictures correlated above 0.97
    *and* colours within 12 levels on average (brightness by 20% moves them more) are what a copy looks
    like; distinct images of the zoo must not."""
    images = [image for _, image in _drawn(name, 60 // len(STYLES[name].classes) + 1)]
    assert len({_bytes(image) for image in images}) == len(images)
    greys = np.stack([_grey(image) for image in images])
    colours = np.stack([_colours(image) for image in images])
    correlation = greys @ greys.T
    for i, j in zip(*np.nonzero(np.triu(correlation > 0.97, 1))):
        assert np.abs(colours[i] - colours[j]).mean() >= 12, (name, i, j, correlation[i, j])


@pytest.mark.parametrize('name', STYLE_NAMES)
def test_every_style_draws_the_size_asked_for(name):
    for size in (STYLES[name].size, 48):
        for _, image in _drawn(name, 2, size):
            assert max(image.size) == size, (name, image.size)
            assert min(image.size) >= 4
    if name == 'tiny':
        assert all(max(image.size) <= 24 for _, image in _drawn(name, 3))


def _estimated_factor(original, copy):
    """The slope of copy on original over the pixels neither clipped nor near black: what brightness
    (about 0) or contrast (about the mean) multiplied by."""
    a, b = (np.asarray(i, dtype=np.float64).ravel() for i in (original, copy))  # every channel: clipped alone
    keep = (b > 3) & (b < 252) & (a > 20)
    return np.polyfit(a[keep], b[keep], 1)[0], np.median(b[keep] / a[keep])


def _check_edit(edit, original, copy, copy_path):
    """Asserts that ``copy`` (saved at ``copy_path``) is ``original`` changed by single ``edit``."""
    width, height = original.size
    same_size = copy.size == original.size
    level = np.abs(np.asarray(original, dtype=np.float64) - np.asarray(copy, dtype=np.float64)) if same_size else None
    with Image.open(copy_path) as saved:
        saved_format = saved.format
        tables = getattr(saved, 'quantization', None)
    if edit == 'png':
        assert saved_format == 'PNG' and level.max() == 0
    elif edit == 'jpeg':
        assert saved_format == 'JPEG' and same_size and 0 < level.mean() < 30  # fine textures lose most
        luma = sum(tables[0])  # JPEG quality 30-50: its luma table lies between those of 50 and 30
        bounds = []
        for quality in (50, 30):
            out = io.BytesIO()
            original.save(out, format='JPEG', quality=quality)
            bounds.append(sum(Image.open(out).quantization[0]))
        assert bounds[0] <= luma <= bounds[1]
    elif edit == 'scale':
        assert 0.5 - 1.5 / width <= copy.size[0] / width <= 0.7 + 1.5 / width or copy.size[0] == 4
        assert 0.5 - 1.5 / height <= copy.size[1] / height <= 0.7 + 1.5 / height or copy.size[1] == 4
    elif edit == 'crop':
        cut = (width - copy.size[0]) / 2
        assert 0.02 * width - 1 <= cut <= 0.05 * width + 1 and cut >= 1
        dy = (height - copy.size[1]) // 2
        inside = np.asarray(original, dtype=np.float64)[dy:dy + copy.size[1], round(cut):round(cut) + copy.size[0]]
        assert np.abs(inside - np.asarray(copy, dtype=np.float64)).mean() < 10  # re-saving's noise only
    elif edit in ('brightness', 'contrast'):
        assert same_size
        slope, ratio = _estimated_factor(original, copy)
        factor = ratio if edit == 'brightness' else slope
        assert 0.06 <= abs(factor - 1) <= 0.26, (edit, factor)
    elif edit in ('caption', 'watermark'):
        assert same_size
        rows = level.mean(axis=(1, 2))
        changed = np.nonzero(rows > np.median(rows) + 8)[0]  # the median: re-saving's noise, the bar aside
        assert len(changed) >= 2
        assert changed.max() - changed.min() + 1 <= max(3, 0.12 * height + 2)  # one bar across the image
        if edit == 'caption':
            assert changed.max() >= height - 2
        assert np.delete(rows, range(changed.min(), changed.max() + 1)).mean() < 7


@pytest.mark.parametrize('name', STYLE_NAMES)
def test_planted_copies_are_the_edits_they_claim(name, tmp_path):
    corpus = zoo.write_corpus(name, str(tmp_path / name), classes=2, per_class=12,
                              planted=2 * len(zoo_edits.SINGLE_EDITS), combined=len(zoo_edits.COMBINED_EDITS))
    assert sorted({p['edit'] for p in corpus.pairs}) == sorted(zoo_edits.EDITS)
    for pair in corpus.pairs:
        with Image.open(tmp_path / name / pair['original']) as original, Image.open(tmp_path / name / pair['copy']) as copy:
            original, copy = original.convert('RGB'), copy.convert('RGB')
        assert pair['kind'] == ('combined' if '+' in pair['edit'] else 'single')
        if pair['kind'] == 'single':
            _check_edit(pair['edit'], original, copy, tmp_path / name / pair['copy'])
        else:
            assert _bytes(copy) != _bytes(original)
            if 'jpeg' in pair['edit']:
                assert pair['copy'].endswith('.jpg')
            if 'scale' in pair['edit']:
                assert copy.size[0] <= 0.7 * original.size[0] + 1


def test_a_corpus_is_written_the_same_and_its_truth_says_what_is_where(tmp_path):
    corpora = [zoo.write_corpus('icons', str(tmp_path / name), classes=3, per_class=6, planted=5, combined=3,
                                cross_label=2, seed=4) for name in ('a', 'b')]
    files = {name: sorted(str(p.relative_to(tmp_path / name)) for p in (tmp_path / name).rglob('*') if p.is_file())
             for name in ('a', 'b')}
    assert files['a'] == files['b'] and len(files['a']) == 3 * 6 + 5 + 3 + 2
    assert all((tmp_path / 'a' / f).read_bytes() == (tmp_path / 'b' / f).read_bytes() for f in files['a'])
    corpus = corpora[0]
    assert corpus.classes == list(STYLES['icons'].classes[:3]) and len(corpus.images) == 18
    assert [p['kind'] for p in corpus.pairs].count('combined') == 3
    for pair in corpus.pairs:
        original_label, copy_label = pair['original'].split('/')[0], pair['copy'].split('/')[0]
        assert (original_label != copy_label) == pair['cross_label']
    assert len({p['original'] for p in corpus.pairs}) == len(corpus.pairs)  # one copy an original at most
    truth = zoo.truth_path(str(tmp_path / 'a'))
    assert not truth.startswith(str(tmp_path / 'a') + os.sep)  # beside the folder, not in a class of it
    loaded = zoo.Corpus.load(truth)
    assert loaded == corpus
    assert json.load(open(truth, encoding='utf-8'))['format'] == zoo.TRUTH_FORMAT
    with pytest.raises(ValueError, match="style 'photos_check' has fewer than 400 distinct images in .*camera"):
        zoo.write_corpus('photos_check', str(tmp_path / 'c'), per_class=400)
    with pytest.raises(ValueError, match='planted copies need'):
        zoo.write_corpus('icons', str(tmp_path / 'c'), classes=1, per_class=2, planted=3, combined=0)


def test_the_halves_split_the_styles_and_each_has_low_detail_and_photos():
    assert set(zoo.TUNING_STYLES) | set(zoo.CHECK_STYLES) == set(STYLES)
    assert not set(zoo.TUNING_STYLES) & set(zoo.CHECK_STYLES)
    for half in (zoo.TUNING_STYLES, zoo.CHECK_STYLES):
        assert {'photos', 'photos_check'} & set(half)
        assert len(set(half) - {'photos', 'photos_check'}) >= 4
    assert not set(STYLES['photos'].classes) & set(STYLES['photos_check'].classes)


def test_the_command_lists_styles_and_writes_one(tmp_path, capsys):
    zoo.main(['--list'])
    listed = capsys.readouterr().out
    assert all(name in listed for name in STYLES)
    zoo.main(['--style', 'renders', '--output', str(tmp_path / 'r'), '--per_class', '3', '--planted', '2',
              '--combined', '1', '--classes', '2', '--size', '40'])
    corpus = zoo.Corpus.load(str(tmp_path / 'r') + '.truth.json')
    assert len(corpus.images) == 6 and len(corpus.pairs) == 3 and corpus.size == 40


def _fake_version(folder, near, quarantine, splits):
    """A version folder with only what the scorer reads: near_duplicates.jsonl, quarantine.jsonl and an
    index part of (source, split)."""
    import pyarrow  # pylint: disable=import-outside-toplevel
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    os.makedirs(os.path.join(folder, layout.INDEX_DIR))
    with open(os.path.join(folder, layout.NEAR_DUPLICATES_JSONL), 'w', encoding='utf-8') as out:
        out.writelines(json.dumps({'source': s, 'group': g, 'distance': 3, 'split': splits.get(s)}) + '\n' for s, g in near)
    with open(os.path.join(folder, layout.QUARANTINE_JSONL), 'w', encoding='utf-8') as out:
        out.writelines(json.dumps({'source': s, 'reason': r, 'message': ''}) + '\n' for s, r in quarantine)
    pq.write_table(pyarrow.table({'source': list(splits), 'split': list(splits.values())}),
                   os.path.join(folder, layout.index_file_name(0, 1)))
    return folder


def test_the_scorer_counts_what_the_targets_count(tmp_path):
    images = [{'source': f'x/{n}.png', 'label': 'x'} for n in 'abcdef']
    pairs = [{'original': 'x/a.png', 'copy': 'x/a2.png', 'edit': 'jpeg', 'kind': 'single', 'cross_label': False},
             {'original': 'x/b.png', 'copy': 'x/b2.png', 'edit': 'scale', 'kind': 'single', 'cross_label': False},
             {'original': 'x/c.png', 'copy': 'x/c2.png', 'edit': 'crop+caption', 'kind': 'combined', 'cross_label': False},
             {'original': 'x/d.png', 'copy': 'y/d2.png', 'edit': 'png', 'kind': 'single', 'cross_label': True}]
    corpus = zoo.Corpus(style='fake', folder=str(tmp_path), seed=0, size=8, classes=['x', 'y'], images=images, pairs=pairs)
    near = [('x/a.png', 'g1'), ('x/a2.png', 'g1'),                   # found
            ('x/b2.png', 'g2'), ('x/e.png', 'g2'),                   # b's copy with e: b and e grouped, b missed
            ('x/c.png', 'g3'), ('x/c2.png', 'g3')]                   # found
    splits = {'x/a.png': 'train', 'x/a2.png': 'validation', 'x/b.png': 'train', 'x/b2.png': 'validation',
              'x/c.png': 'train', 'x/c2.png': 'train', 'x/e.png': 'validation', 'x/f.png': 'train'}
    quarantine = [('x/d.png', 'near_duplicate_label_conflict'), ('y/d2.png', 'near_duplicate_label_conflict')]
    result = zoo_scores.score(corpus, _fake_version(str(tmp_path / 'v1'), near, quarantine, splits), True)
    assert (result.images, result.quarantined, result.copies_quarantined, result.grouped) == (6, 1, 1, 2)
    assert result.quarantine_reasons == {'near_duplicate_label_conflict': 1}
    assert (result.single_found, result.single_total, result.combined_found, result.combined_total) == (1, 2, 1, 1)
    assert (result.cross_label_found, result.cross_label_total) == (0, 1)
    assert result.pairs_across_splits == 2 and sorted(result.across) == [['x/a.png', 'x/a2.png'], ['x/b.png', 'x/b2.png']]
    assert result.missed == {'scale': 1, 'png': 1}
    assert result.false_groups == [['x/b2.png', 'x/e.png']]
    assert result.grouped_share == pytest.approx(2 / 6) and result.single_recall == 0.5
    failures = result.failures()
    assert len(failures) == 4 and not any('combined' in line or 'build' in line for line in failures)
    table = zoo_scores.format_table([result])
    assert table.splitlines()[1].startswith('fake') and '1/2 (50%)' in table


def test_the_scorer_reads_a_failed_build_and_a_clean_one(tmp_path):
    images = [{'source': 'x/a.png', 'label': 'x'}, {'source': 'x/b.png', 'label': 'x'}]
    pairs = [{'original': 'x/a.png', 'copy': 'x/a2.png', 'edit': 'png', 'kind': 'single', 'cross_label': False}]
    corpus = zoo.Corpus(style='fake', folder=str(tmp_path), seed=0, size=8, classes=['x'], images=images, pairs=pairs)
    clean = zoo_scores.score(corpus, _fake_version(str(tmp_path / 'v1'), [('x/a.png', 'x/a.png'), ('x/a2.png', 'x/a.png')],
                                                    [], {'x/a.png': 'train', 'x/a2.png': 'train', 'x/b.png': 'train'}))
    assert clean.failures() == [] and clean.single_recall == 1.0
    failed = zoo_scores.score(corpus, str(tmp_path / 'missing'), build_succeeded=False)  # nothing to read
    assert failed.failures()[0] == 'the build failed' and failed.single_found == 0


def test_make_twin_keeps_its_strengths_unless_given_others():
    """The photo corpus's twins (``near_duplicates.TRANSFORMS``) are drawn as before; the zoo's take its ranges."""
    from imgrec.samples.near_duplicates import TWIN_RANGES, make_twin  # pylint: disable=import-outside-toplevel
    image = Image.new('RGB', (200, 100), (120, 80, 40))
    assert make_twin(image, 'jpeg', random.Random(1)) == (image, 'jpg', random.Random(1).randint(*TWIN_RANGES['jpeg']))
    for seed in range(20):
        assert 30 <= make_twin(image, 'jpeg', random.Random(seed), zoo_edits.ZOO_RANGES)[2] <= 50
        small = make_twin(image, 'scale', random.Random(seed), zoo_edits.ZOO_RANGES)[0]
        assert 100 <= small.size[0] <= 140
