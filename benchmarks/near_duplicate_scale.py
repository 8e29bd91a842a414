"""Near-duplicates at the sizes users build: every low-detail style of the zoo at 2,000, 10,000 and 20,000 images,
built with each --near_duplicate_check against --near_duplicates off in the same run, and the perceptual rule
measured in this process (no Beam) on the same images.

    python benchmarks/near_duplicate_scale.py [--styles digits,pages] [--sizes 2000,10000,20000]
        [--builds off,exact] [--lab] [--k 3] [--threshold 20] [--show DIR]

The corpus of a style is ``benchmarks/zoo_builds.py``'s at the largest size (distinct images of one style, 5% of
them with a planted copy by one edit, 2.5% by two), and each smaller size the first originals of each class with
their copies (hard links). ``--builds``: each size built as a user builds it (a process of its own, DirectRunner,
one worker process a core, 64 pixels) with each mode named (``off``, ``exact``, ``perceptual``), alternated in one
run; a row per mode gives the time and the peak memory of the process tree against ``off``'s, the pixel checks
an image (candidates), the share of distinct images grouped with another family, the near-duplicate pairs under
two labels, and the planted copies found (single and combined edits; ``imgrec.samples.zoo_scores``). ``--lab``:
a row ``lab`` for the perceptual rule run here on the images as a build writes them
(``image_ops.decode_resize_encode``, cached): candidates an image (``hash_neighbours.nearest_pairs``), the pixel
checks' CPU an image, grouped share, false links under two labels, and recall; ``--show DIR`` writes each false
link's two pictures side by side, to look at.
"""
import argparse
import collections
import json
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zoo_builds  # noqa: E402
from harness import CACHE, counter, job  # noqa: E402

from imgrec.contract import counters, layout  # noqa: E402
from imgrec.imaging import hash_neighbours, image_ops, perceptual_hash as ph, picture_check  # noqa: E402
from imgrec.imaging.record_options import RecordOptions  # noqa: E402
from imgrec.samples import zoo, zoo_scores  # noqa: E402
from imgrec.transforms.near_duplicate_candidates import NEIGHBOURS, member_id  # noqa: E402

LOW_DETAIL = ('digits', 'pages', 'objects', 'scans', 'icons', 'tiny', 'textures', 'gradients', 'renders')
IMAGE_SIZE = 64


def _prepare(path):
    with open(path, 'rb') as stream:
        data = stream.read()
    jpeg, notes = image_ops.decode_resize_encode(data, RecordOptions((IMAGE_SIZE, IMAGE_SIZE)), with_hash=True)
    return ph.from_hex(notes['perceptual_hash']), jpeg


def corpus_of(style, images, largest):
    """The corpus of ``images`` distinct images of ``style``: the first of each class of the corpus of ``largest``
    with their planted copies, hard-linked into a folder of its own (the largest's folder itself at that size)."""
    classes = len(zoo.STYLES[style].classes)
    whole = zoo_builds.zoo_corpus(style, -(-largest // classes))
    if images >= largest:
        return whole
    per_class = -(-images // classes)
    kept, taken = set(), collections.Counter()
    for image in whole.images:
        if taken[image['label']] < per_class:
            taken[image['label']] += 1
            kept.add(image['source'])
    pairs = [pair for pair in whole.pairs if pair['original'] in kept]
    folder = os.path.join(CACHE, f'scale{zoo.DRAWING}-{style}-{images}-of-{largest}')
    if not os.path.isdir(folder):
        for source in sorted(kept | {pair['copy'] for pair in pairs}):
            os.makedirs(os.path.join(folder + '.partial', os.path.dirname(source)), exist_ok=True)
            os.link(os.path.join(whole.folder, source), os.path.join(folder + '.partial', source))
        os.rename(folder + '.partial', folder)
    return zoo.Corpus(style=style, folder=folder, seed=whole.seed, size=whole.size, classes=whole.classes,
                      images=[image for image in whole.images if image['source'] in kept], pairs=pairs)


def prepared(corpus):
    """(sources, labels, hashes (n x 2 uint64), JPEGs): every file of ``corpus``, as a build hashes and writes it."""
    cached = corpus.folder.rstrip('/') + f'.prepared-{IMAGE_SIZE}.pickle'

    if not os.path.exists(cached):
        sources = sorted(image['source'] for image in corpus.images) + sorted(pair['copy'] for pair in corpus.pairs)
        with multiprocessing.Pool(os.cpu_count()) as pool:
            done = pool.map(_prepare, [os.path.join(corpus.folder, source) for source in sources], chunksize=64)
        with open(cached + '.partial', 'wb') as out:
            pickle.dump((sources, done), out)
        os.rename(cached + '.partial', cached)
    with open(cached, 'rb') as stream:
        sources, done = pickle.load(stream)
    labels = [source.split('/')[0] for source in sources]
    hashes = np.array([values for values, _ in done], dtype=np.uint64)
    return sources, labels, hashes, [jpeg for _, jpeg in done]


def _find(parent, item):
    while parent[item] != item:
        parent[item] = parent[parent[item]]
        item = parent[item]
    return item


def lab(corpus, k, threshold, show=None):
    """The perceptual rule on ``corpus`` in this process: a row of the table."""
    style, images = corpus.style, len(corpus.images)
    sources, labels, hashes, jpegs = prepared(corpus)
    order = np.argsort([member_id(source) for source in sources], kind='stable')  # ties broken as a build breaks them
    started = time.process_time()
    pairs = hash_neighbours.nearest_pairs(hashes[order], threshold, k)
    search = time.process_time() - started
    pairs[:, :2] = order[pairs[:, :2]]
    started = time.process_time()
    levels = {}
    links = []
    for i, j, distance in pairs.tolist():
        for index in (i, j):
            if index not in levels:
                levels[index] = picture_check.levels_from_jpeg(jpegs[index])
        if jpegs[i] == jpegs[j]:
            links.append((i, j, distance, 1.0))
            continue
        same, similarity = picture_check.judge(levels[i].picture(), levels[j].picture())
        if same:
            links.append((i, j, distance, similarity))
    check = time.process_time() - started
    family = {source: source for source in sources}
    for pair in corpus.pairs:
        family[pair['copy']] = pair['original']
    index_of = {source: n for n, source in enumerate(sources)}
    parent = list(range(len(sources)))
    for i, j, _, _ in links:
        parent[_find(parent, i)] = _find(parent, j)
    members = collections.defaultdict(set)
    for n, source in enumerate(sources):
        members[_find(parent, n)].add(family[source])
    grouped = sum(1 for image in corpus.images
                  if len(members[_find(parent, index_of[image['source']])]) > 1)
    false = [(i, j, d, s) for i, j, d, s in links if family[sources[i]] != family[sources[j]]]
    across = [(i, j, d, s) for i, j, d, s in false if labels[i] != labels[j]]
    found = collections.Counter()
    total = collections.Counter()
    for pair in corpus.pairs:
        total[pair['kind']] += 1
        if _find(parent, index_of[pair['original']]) == _find(parent, index_of[pair['copy']]):
            found[pair['kind']] += 1
    if show and false:
        _show(show, style, images, false, sources, jpegs)
    return dict(mode='lab', time=f'{1e3 * search:.0f} ms', peak=f'{1e6 * check / len(sources):.0f} us',
                candidates=len(pairs) / len(sources), grouped=grouped / len(corpus.images), across=len(across),
                single=f"{found['single']}/{total['single']}", combined=f"{found['combined']}/{total['combined']}")


def builds(corpus, modes, runs, output):
    """A row a mode of ``modes`` but off: each built ``runs`` times, alternated with the others, in one run."""
    measured = collections.defaultdict(list)
    for run in range(runs):
        for mode in modes:
            checked = ['--near_duplicates', 'off'] if mode == 'off' else ['--near_duplicate_check', mode]
            measured[mode].append(job([
                '--input', corpus.folder, '--output', os.path.join(output, f'{mode}-{run}'), '--version', 'scale',
                '--image_size', str(IMAGE_SIZE), '--splits', 'train=90,validation=10', *checked,
                '--direct_running_mode', 'multi_processing', '--direct_num_workers', str(os.cpu_count())]))
    files = len(corpus.images) + len(corpus.pairs)
    seconds = {mode: sum(run['seconds'] for run in done) for mode, done in measured.items()}
    peak = {mode: max(run['peak_tree'] for run in done) for mode, done in measured.items()}
    rows = []
    for mode in modes:
        if mode == 'off':
            continue
        last = measured[mode][-1]
        score = zoo_scores.score(corpus, last['version_dir'])
        with open(os.path.join(last['version_dir'], layout.DATASET_JSON), encoding='utf-8') as stream:
            near = json.load(stream)['near_duplicates']
        checks = counter(last, counters.PAIRS_CONFIRMED) + counter(last, counters.PAIRS_REFUSED)
        rows.append(dict(mode=mode, time=f"{seconds[mode] / seconds['off']:.2f}x ({seconds['off'] / runs:.0f} s)",
                         peak=f"{peak[mode] / peak['off']:.2f}x ({peak['off'] / 1e6:.0f} MB)",
                         candidates=checks / files, grouped=score.grouped_share, across=near['pairs_across_labels'],
                         single=f'{score.single_found}/{score.single_total}',
                         combined=f'{score.combined_found}/{score.combined_total}'))
    shutil.rmtree(output, ignore_errors=True)
    return rows


def _show(folder, style, images, false, sources, jpegs):
    import io  # pylint: disable=import-outside-toplevel
    from PIL import Image, ImageDraw  # pylint: disable=import-outside-toplevel
    os.makedirs(folder, exist_ok=True)
    rows = false[:40]
    sheet = Image.new('RGB', (2 * IMAGE_SIZE + 200, IMAGE_SIZE * len(rows)), 'white')
    draw = ImageDraw.Draw(sheet)
    for row, (i, j, distance, similarity) in enumerate(rows):
        for column, index in enumerate((i, j)):
            sheet.paste(Image.open(io.BytesIO(jpegs[index])).convert('RGB'), (column * IMAGE_SIZE, row * IMAGE_SIZE))
        draw.text((2 * IMAGE_SIZE + 4, row * IMAGE_SIZE + 4),
                  f'{sources[i].split("/")[0]} {sources[j].split("/")[0]} d={distance} s={similarity}', fill='black')
    sheet.save(os.path.join(folder, f'{style}-{images}.png'))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--styles', default=None, help='comma-separated (default: the low-detail styles of --half)')
    parser.add_argument('--half', choices=('tuning', 'check', 'all'), default='all')
    parser.add_argument('--sizes', default='2000,10000,20000')
    parser.add_argument('--builds', default='off,exact', help="modes built, 'off' first (none: '')")
    parser.add_argument('--runs', type=int, default=1, help='builds of each mode, alternated')
    parser.add_argument('--lab', action='store_true', help='also the perceptual rule in this process')
    parser.add_argument('--k', type=int, default=NEIGHBOURS)
    parser.add_argument('--threshold', type=int, default=ph.MAX_THRESHOLD)
    parser.add_argument('--show', default=None)
    args = parser.parse_args()
    styles = args.styles.split(',') if args.styles else [
        style for style in LOW_DETAIL if args.half == 'all'
        or (style in zoo.TUNING_STYLES) == (args.half == 'tuning')]
    sizes = sorted(map(int, args.sizes.split(',')))
    modes = [mode for mode in args.builds.split(',') if mode]
    print(f'{os.cpu_count()} cores; built at {IMAGE_SIZE} px with {", ".join(modes) or "no build"}, {args.runs} '
          f'run(s) alternated; lab: k {args.k}, threshold {args.threshold}. time and peak: against off in the same '
          f'run (lab: the nearest search, ms, and the pixel checks, us an image); candidates: pixel checks an image')
    head = ('style', 'images', 'mode', 'time', 'peak', 'candidates', 'grouped', 'across', 'single', 'combined')
    print('| ' + ' | '.join(head) + ' |\n|' + ' --- |' * len(head), flush=True)
    for style in styles:
        for size in sizes:
            corpus = corpus_of(style, size, sizes[-1])
            rows = builds(corpus, modes, args.runs, tempfile.mkdtemp(prefix='near-dup-scale-')) if modes else []
            if args.lab:
                rows.append(lab(corpus, args.k, args.threshold, args.show))
            for row in rows:
                cells = (style, f'{len(corpus.images):,}', row['mode'], row['time'], row['peak'],
                         f"{row['candidates']:.2f}", f"{row['grouped']:.2%}", row['across'], row['single'],
                         row['combined'])
                print('| ' + ' | '.join(map(str, cells)) + ' |', flush=True)


if __name__ == '__main__':
    main()
