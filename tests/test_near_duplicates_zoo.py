"""Issue 39's targets on every style of the zoo (``imgrec.samples.zoo``), at small scale, with the perceptual check:
no distinct image quarantined, the build succeeds, planted pairs under two labels written (not removed) and
listed, no distinct image grouped with another's family; the recall targets on the styles that meet them,
and on the others the recall measured now as a floor (``FLOORS``: the hash, not the pixel check, misses
most of those copies; docs/near-duplicates.md has the full-size table). One build a style, shared by its
tests. Also: the explicit quarantine option removes the cross-label pairs, a refresh writes what an earlier
version quarantined as a near-duplicate label conflict and says so in one line, and a browser sees both
thumbnails of each cross-label pair side by side in the report's Warnings."""
import glob
import json
import os

import numpy as np
import pytest
from PIL import Image

from imgrec.pipelines import build_dataset, launcher
from imgrec.samples import zoo, zoo_scores
from tests.chromium import open_page, requires_chromium

# Planted copies found at this scale (single, combined of 16 and 8), where a style misses issue 39's recall
# targets (97% and 90%): measured 2026-12-06, kept as floors so that a change that loses copies shows. The
# misses: a 16-pixel image scaled or re-compressed (both hashes move past the threshold, and JPEG moves so
# few pixels' colour as far as another image's), a watermark or contrast change that moves a smooth
# gradient's hashes, copies of pages whose watermark bar lowers the correlation, and of icons whose bar hides
# the icon. docs/near-duplicates.md has the table at 1,000 images a style.
FLOORS = {
    'digits': (16, 7), 'pages': (16, 7), 'scans': (16, 7), 'icons': (15, 8), 'gradients': (14, 8),
    'textures': (14, 7), 'tiny': (13, 4),
}
SIZE = '64'


def _build(folder, output, *extra):
    launcher.run(['--input', folder, '--output', output, '--image_size', SIZE, '--direct_running_mode',
                  'in_memory', '--no_progress', '--near_duplicate_check', 'perceptual', *extra])


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """{style: (corpus, Score, dataset.json)}: one build of every style, 2 classes of 16 distinct images,
    24 planted copies (each single edit twice, each combined edit once) and 2 under another label, built
    lazily as asked."""
    cache = {}

    def get(style):
        if style not in cache:
            root = tmp_path_factory.mktemp(style)
            corpus = zoo.write_corpus(style, str(root / 'in'), classes=2, per_class=16, planted=16, combined=8,
                                      cross_label=2)
            ok = True
            try:
                _build(str(root / 'in'), str(root / 'out'))
            except Exception:  # pylint: disable=broad-except  # scored as a failed build
                ok = False
            version = zoo_scores.latest_version(str(root / 'out')) if ok else None
            score = zoo_scores.score(corpus, version, ok) if ok else None
            document = json.load(open(os.path.join(version, 'dataset.json'), encoding='utf-8')) if ok else None
            cache[style] = corpus, score, document
        return cache[style]
    return get


@pytest.mark.parametrize('style', sorted(zoo.STYLES))
def test_the_check_never_removes_a_distinct_image_and_succeeds(built, style):
    corpus, score, document = built(style)
    assert score is not None and score.build_succeeded
    assert score.quarantined == 0 and score.copies_quarantined == 0, score.quarantine_reasons
    assert document['counts']['quarantined'] == 0
    near = document['near_duplicates']
    assert near['conflicts'] == 'keep' and near['label_conflicts'] == 0
    assert len(near['label_conflict_pairs']) == near['pairs_across_labels'] <= 100


@pytest.mark.parametrize('style', sorted(zoo.STYLES))
def test_the_targets_per_style(built, style):
    """No distinct image grouped with another family (at most 0.5%: none at this size); the recall targets
    where they are met, the measured floors where not; a planted pair in two splits only if it was missed."""
    _, score, _ = built(style)
    assert score.grouped == 0, score.false_groups
    if style in FLOORS:
        assert score.single_found >= FLOORS[style][0] and score.combined_found >= FLOORS[style][1], score.missed
        assert score.pairs_across_splits <= sum(score.missed.values())
    else:
        assert score.failures() == []


def test_the_default_links_no_distinct_glyph_nor_noise_and_finds_the_same_picture_saved_again(tmp_path):
    """The default check (exact) on distinct digits of ten classes, a copy of each saved again as PNG (the same
    pixels) planted under another class, and random-noise images of two classes (one flat grey at the output
    size, where the pixel check links them): only the pictures saved again are linked, and listed as pairs
    under two labels."""
    root = tmp_path / 'in'
    corpus = zoo.write_corpus('digits', str(root), per_class=8, planted=0, combined=0, cross_label=8)
    rng = np.random.default_rng(3)
    for label in ('noise_a', 'noise_b'):
        (root / label).mkdir()
        for i in range(6):
            Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(root / label / f'{i}.png')
    launcher.run(['--input', str(root), '--output', str(tmp_path / 'out'), '--image_size', SIZE,
                  '--direct_running_mode', 'in_memory', '--no_progress'])
    version = zoo_scores.latest_version(str(tmp_path / 'out'))
    score = zoo_scores.score(corpus, version)
    document = json.load(open(os.path.join(version, 'dataset.json'), encoding='utf-8'))
    near = document['near_duplicates']
    resaved = {frozenset((pair['original'], pair['copy'])) for pair in corpus.pairs if pair['edit'] == 'png'}
    assert resaved and score.grouped == 0
    assert {frozenset((pair['source'], pair['other'])) for pair in near['label_conflict_pairs']} == resaved
    assert near['pairs'] == near['pairs_across_labels'] == len(resaved) and near['groups'] == len(resaved)


def test_cross_label_pairs_are_kept_listed_and_quarantined_only_when_asked(built, tmp_path):
    corpus, score, document = built('digits')
    assert score.cross_label_found == score.cross_label_total == 2
    listed = {frozenset((p['source'], p['other'])) for p in document['near_duplicates']['label_conflict_pairs']}
    planted = {frozenset((p['original'], p['copy'])) for p in corpus.pairs if p['cross_label']}
    assert planted <= listed
    for pair in document['near_duplicates']['label_conflict_pairs']:
        assert pair['split'] == pair['other_split'] and pair['label'] != pair['other_label']
    out = str(tmp_path / 'out')
    _build(corpus.folder, out, '--near_duplicate_conflicts', 'quarantine', '--max_error_rate', '0.5')
    version = zoo_scores.latest_version(out)
    quarantined = {json.loads(line)['source'] for line in open(os.path.join(version, 'quarantine.jsonl'))}
    assert set().union(*planted) <= quarantined
    quarantined_document = json.load(open(os.path.join(version, 'dataset.json'), encoding='utf-8'))
    assert quarantined_document['near_duplicates']['label_conflicts'] == len(quarantined)


def test_a_refresh_writes_what_an_earlier_version_quarantined_as_a_near_duplicate_conflict(built, tmp_path, capsys):
    corpus, _, _ = built('objects')
    out = str(tmp_path / 'out')
    _build(corpus.folder, out, '--version', 'v1', '--near_duplicate_conflicts', 'quarantine', '--max_error_rate', '0.5')
    quarantined = {json.loads(line)['source'] for line in open(os.path.join(out, 'v1', 'quarantine.jsonl'))}
    assert quarantined
    assert build_dataset.main(['--input', corpus.folder, '--output', out, '--version', 'v2', '--image_size', SIZE,
                               '--direct_running_mode', 'in_memory', '--no_progress',
                               '--near_duplicate_conflicts', 'keep']) == 0  # given: else v1's is kept
    printed = capsys.readouterr()
    document = json.load(open(os.path.join(out, 'v2', 'dataset.json'), encoding='utf-8'))
    assert document['near_duplicates']['conflicts_written_again'] == len(quarantined)
    assert document['counts']['quarantined'] == 0
    assert (f'{len(quarantined)} images the previous version quarantined as near-duplicate label conflicts were '
            f'decided again and written') in printed.out + printed.err
    assert glob.glob(os.path.join(out, 'v2', 'index', '*.parquet'))


# What the report's Warnings show of the near-duplicate pairs under two labels, measured by the browser.
CONFLICTS_PROBE = """JSON.stringify({
  pairs: Array.from(document.querySelectorAll('#conflict-pairs .conflict-pair')).map(pair =>
    Array.from(pair.querySelectorAll('figure.conflict')).map(figure => {
      const image = figure.querySelector('img');
      const box = image ? image.getBoundingClientRect() : null;
      return {source: image ? image.alt : null, shown: !!image && image.complete && image.naturalWidth > 0,
              top: box ? Math.round(box.top) : null, left: box ? Math.round(box.left) : null,
              caption: figure.querySelector('figcaption').innerText};
    })),
  warnings: document.querySelector('#warnings').nextElementSibling.innerText,
})"""


@requires_chromium
def test_the_report_warnings_show_both_thumbnails_of_each_cross_label_pair_side_by_side(built, tmp_path):
    corpus, _, document = built('digits')
    version = zoo_scores.latest_version(os.path.join(os.path.dirname(corpus.folder), 'out'))
    page = open_page(os.path.join(version, 'report.html'), CONFLICTS_PROBE, str(tmp_path / 'chromium-profile'))
    assert page.errors == [] and page.requests == []
    shown = json.loads(page.evaluated)
    listed = document['near_duplicates']['label_conflict_pairs']
    assert len(shown['pairs']) == len(listed) >= 2
    for pair, row in zip(shown['pairs'], listed):
        assert [figure['source'] for figure in pair] == [row['source'], row['other']]
        assert all(figure['shown'] for figure in pair)  # both thumbnails decoded and drawn
        first, second = pair
        assert first['top'] == second['top'] and first['left'] < second['left']  # side by side
        assert row['label'] in first['caption'] and row['other_label'] in second['caption']
    assert 'near-duplicate pairs are filed under two labels' in shown['warnings']
