"""The near-duplicate rule at the sizes users build: every low-detail style of the zoo at 2,000, 10,000 and
20,000 images, the candidates and the pixel check run in this process (no Beam), so that a rule can be
measured on 20,000 images of one kind in seconds.

    python benchmarks/near_duplicate_scale.py [--styles digits,pages] [--sizes 2000,10000,20000] [--k 3]
        [--threshold 20] [--half tuning|check|all] [--show DIR]

Each corpus is ``benchmarks/zoo_builds.py``'s (distinct images of one style, 5% of them with a planted copy by
one edit, 2.5% by two), prepared once as a build prepares it (``image_ops.decode_resize_encode`` at 64 pixels:
the hashes of the decoded source, the JPEG written) and cached. For each style and size it prints: candidates an
image (``hash_neighbours.nearest_pairs``), the pixel checks' CPU an image, the share of distinct images grouped
with another family (a false link), the false links under two labels, and the planted copies found (single and
combined edits). ``--show DIR`` writes each false link's two pictures side by side, to look at.
"""
import argparse
import collections
import multiprocessing
import os
import pickle
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zoo_builds  # noqa: E402
from harness import CACHE  # noqa: E402

from imgrec.contract.hashing import stable_hash  # noqa: E402
from imgrec.imaging import hash_neighbours, image_ops, perceptual_hash as ph, picture_check  # noqa: E402
from imgrec.imaging.record_options import RecordOptions  # noqa: E402
from imgrec.samples import zoo  # noqa: E402

LOW_DETAIL = ('digits', 'pages', 'objects', 'scans', 'icons', 'tiny', 'textures', 'gradients', 'renders')
IMAGE_SIZE = 64


def _prepare(path):
    with open(path, 'rb') as stream:
        data = stream.read()
    jpeg, notes = image_ops.decode_resize_encode(data, RecordOptions((IMAGE_SIZE, IMAGE_SIZE)), with_hash=True)
    return ph.from_hex(notes['perceptual_hash']), jpeg


def prepared(style, images):
    """(corpus, sources, labels, hashes (n x 2 uint64), JPEGs): every file of the corpus of about ``images``
    distinct images, as a build hashes and writes it."""
    classes = len(zoo.STYLES[style].classes)
    corpus = zoo_builds.zoo_corpus(style, -(-images // classes))
    cached = os.path.join(CACHE, f'scale{zoo.DRAWING}-{style}-{images}-{IMAGE_SIZE}.pickle')
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
    return corpus, sources, labels, hashes, [jpeg for _, jpeg in done]


def _find(parent, item):
    while parent[item] != item:
        parent[item] = parent[parent[item]]
        item = parent[item]
    return item


def measure(style, images, k, threshold, show=None):
    corpus, sources, labels, hashes, jpegs = prepared(style, images)
    order = np.argsort([stable_hash('near-duplicate member', source) for source in sources], kind='stable')
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
    return dict(style=style, images=len(corpus.images), files=len(sources), candidates=len(pairs) / len(sources),
                search_ms=1e3 * search, check_us=1e6 * check / len(sources), grouped=grouped / len(corpus.images),
                false=len(false), across=len(across),
                single=f"{found['single']}/{total['single']}", combined=f"{found['combined']}/{total['combined']}",
                recall_single=found['single'] / max(1, total['single']),
                recall_combined=found['combined'] / max(1, total['combined']))


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
    parser.add_argument('--styles', default=None)
    parser.add_argument('--half', choices=('tuning', 'check', 'all'), default='all')
    parser.add_argument('--sizes', default='2000,10000,20000')
    parser.add_argument('--k', type=int, default=3)
    parser.add_argument('--threshold', type=int, default=ph.MAX_THRESHOLD)
    parser.add_argument('--show', default=None)
    args = parser.parse_args()
    styles = args.styles.split(',') if args.styles else [
        style for style in LOW_DETAIL if args.half == 'all'
        or (style in zoo.TUNING_STYLES) == (args.half == 'tuning')]
    print(f'k {args.k}, threshold {args.threshold}')
    head = ('style', 'images', 'cand/img', 'search ms', 'check us/img', 'grouped', 'false', 'across',
            'single', 'combined')
    print(' '.join(f'{cell:>12}' for cell in head), flush=True)
    for style in styles:
        for size in map(int, args.sizes.split(',')):
            row = measure(style, size, args.k, args.threshold, args.show)
            cells = (style, row['images'], f"{row['candidates']:.2f}", f"{row['search_ms']:.0f}",
                     f"{row['check_us']:.0f}", f"{row['grouped']:.2%}", row['false'], row['across'],
                     row['single'], row['combined'])
            print(' '.join(f'{cell:>12}' for cell in cells), flush=True)


if __name__ == '__main__':
    main()
