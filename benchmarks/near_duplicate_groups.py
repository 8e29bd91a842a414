"""Near-duplicate grouping measured alone, in memory, at scale: does the largest group stay bounded as the
number of images grows?

    python -m benchmarks.near_duplicate_groups [--hashes 20000,100000] [--one_style 2000,20000] [--seed 0]

The grouping is ``imgrec.transforms.near_duplicate_groups``'s rule with the perceptual check, run here with the
module's own pure functions and no Beam: each image proposes its ``NEIGHBOURS`` nearest within the threshold
(``imgrec.imaging.hash_neighbours``, every pair's popcount: the square of the images); each candidate is a
link only if ``picture_check.same_picture`` agrees on the two pictures (here each image's colour field,
enlarged: ``_picture``; a build reads and decodes the written records instead); links are joined into
connected components (``join_labels``, the module's union-find), each component a group unless it is
larger than ``MAX_GROUP`` (``bounded_groups``). ``group_in_memory`` is that rule, with the module's own
functions. The table gives the pixel check's cost per candidate.

Inputs, each size in a process of its own (``harness.measure``: the peak memory of its process tree):
- ``hashes`` N: N 64-bit hashes of independent fair bits (unrelated photos' distances match coin flips,
  docs/near-duplicates.md: mean 32, sd 4.1 against 4.0), each with a colour field drawn as a smooth
  random 8x8 RGB field (a random 3x3 grid of colours, bilinear, plus pixel noise). 1% of the N are planted
  copies of another hash: bits flipped as many as the planted copies of docs/near-duplicates.md's table
  show (``PLANTED_DISTANCES``: each transform in turn, its distance drawn through the table's median, 95th
  percentile and maximum), and a field perturbed as that transform would (re-compression noise; ±8-12%
  brightness; a 2-5% border crop; a dark caption bar over the bottom row).
- ``one_style`` N: N small images drawn in memory by ``imgrec.samples.generate.draw_image`` (one shape on a
  noisy gradient, random colours, sizes and positions: the style in which issue 24 saw one group take
  1,765 of 2,000 images), saved as JPEG and decoded as a build decodes them; 1% of them planted copies
  made by ``imgrec.samples.near_duplicates.make_twin`` (each transform in turn) and saved as it says. Hashed by
  ``imgrec.imaging.perceptual_hash``; their pictures are their 8x8 colour fields (``_picture``).

Printed: a table (hashes, threshold, comparisons, candidates, links, false pairs per image, recall, the
largest group and component, groups, images grouped that are not planted, CPU seconds per 1,000 images,
peak memory), where the grouping's time goes, and how unrelated images' distances compare with coin flips.
"""
import argparse
import collections
import io
import json
import math
import os
import random
import sys
import time

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from imgrec.imaging import perceptual_hash as ph  # noqa: E402
from imgrec.imaging import picture_check  # noqa: E402
from imgrec.imaging import hash_neighbours  # noqa: E402
from imgrec.transforms.near_duplicate_candidates import NEIGHBOURS  # noqa: E402
from imgrec.transforms.near_duplicate_groups import bounded_groups, join_labels  # noqa: E402

PLANTED_SHARE = 0.01
# Hamming distances from planted copies to their originals, docs/near-duplicates.md ("Measured on planted
# copies"): (median, 95th percentile, maximum), the upper end of each range the table gives (the farther
# copies). A copy's distance is drawn through these by its quantile: 0 at the 0th, linear between.
PLANTED_DISTANCES = {
    'jpeg': (0, 2, 4),
    'scale': (3, 7, 9),
    'brightness': (0, 3, 5),
    'png': (3, 6, 12),
    'crop': (8, 15, 16),
    'caption': (8, 16, 18),
}
TRANSFORMS = tuple(PLANTED_DISTANCES)
# The synthetic images' colour field: 8x8 cells, RGB, enlarged for the check (``_picture``).
_SIDE = 8
_BYTES = _SIDE * _SIDE * 3
_GRID = 3           # control points a side of a synthetic thumbnail's smooth colour field
_TEXTURE = 6.0      # sd of a synthetic thumbnail's pixel noise (levels of 255)
_RECOMPRESSED = 3.0  # sd of the noise a re-compressed copy adds to its thumbnail


# -- inputs ----------------------------------------------------------------------------------------------

def planted_distance(kind, u):
    """The distance of a copy made by ``kind`` at quantile ``u`` in [0, 1) of PLANTED_DISTANCES."""
    median, p95, top = PLANTED_DISTANCES[kind]
    value = np.interp(u, (0.0, 0.5, 0.95, 1.0), (0.0, median, p95, top))
    return int(round(float(value)))


def _weights(coordinates, points=_GRID):
    """(len(coordinates), points) bilinear weights of a field with ``points`` control points on [0, 1]."""
    position = np.clip(np.asarray(coordinates, dtype=np.float64), 0.0, 1.0) * (points - 1)
    low = np.minimum(np.floor(position).astype(int), points - 2)
    frac = position - low
    weights = np.zeros((len(position), points))
    weights[np.arange(len(position)), low] = 1 - frac
    weights[np.arange(len(position)), low + 1] = frac
    return weights


_CENTRES = (np.arange(_SIDE) + 0.5) / _SIDE


def _field(grid, ys=_CENTRES, xs=_CENTRES):
    """(..., side, side, 3) values of smooth fields with control ``grid`` (..., points, points, 3)."""
    return np.einsum('yi,...ijc,xj->...yxc', _weights(ys), grid, _weights(xs))


def _as_bytes(values):
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def synthetic(count, seed, planted_share=PLANTED_SHARE):
    """(sources, hashes uint64 array (count, HASHES), colour fields (count, _BYTES) uint8, planted {(a, b): kind}).

    Each image has ``perceptual_hash.HASHES`` hashes (the whole image's and its centre's), independent fair
    bits. Planted copies are ``planted_share`` of ``count``, each of a distinct original, at random
    positions; each of a copy's hashes is its original's with bits flipped as the table says."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, np.iinfo(np.uint64).max, size=(count, ph.HASHES), dtype=np.uint64, endpoint=True)
    grids = np.empty((count, _GRID, _GRID, 3), dtype=np.float32)
    thumbnails = np.empty((count, _BYTES), dtype=np.uint8)
    for start in range(0, count, 50_000):  # bounded temporaries
        stop = min(count, start + 50_000)
        grids[start:stop] = rng.uniform(0, 255, size=(stop - start, _GRID, _GRID, 3))
        noise = rng.normal(0, _TEXTURE, size=(stop - start, _SIDE, _SIDE, 3))
        smooth = _field(grids[start:stop].astype(np.float64))
        thumbnails[start:stop] = _as_bytes(smooth + noise).reshape(stop - start, -1)
    sources = [f'img/{i:07d}.jpg' for i in range(count)]
    copies = int(count * planted_share)
    chosen = rng.permutation(count)[:2 * copies]
    planted = {}
    for n, (original, copy) in enumerate(zip(chosen[:copies].tolist(), chosen[copies:].tolist())):
        kind = TRANSFORMS[n % len(TRANSFORMS)]
        for index in range(ph.HASHES):
            flips = rng.choice(ph.BITS, size=planted_distance(kind, rng.uniform()), replace=False)
            hashes[copy, index] = hashes[original, index] ^ np.uint64(sum(1 << int(bit) for bit in flips))
        thumbnails[copy] = _copied_thumbnail(thumbnails[original], grids[original], kind, rng)
        planted[tuple(sorted((sources[original], sources[copy])))] = kind
    return sources, hashes, thumbnails, planted


def _copied_thumbnail(thumbnail, grid, kind, rng):
    """The thumbnail of a copy made by ``kind`` of the image whose field is ``grid``."""
    values = thumbnail.reshape(_SIDE, _SIDE, 3).astype(np.float64)
    if kind == 'crop':  # the same field seen 2-5% further in from every border, its texture kept
        cut = rng.uniform(0.02, 0.05)
        inner = cut + (1 - 2 * cut) * _CENTRES
        values = values + _field(grid.astype(np.float64), inner, inner) - _field(grid.astype(np.float64))
    elif kind == 'brightness':
        values = values * (1 + rng.choice((-1, 1)) * rng.uniform(0.08, 0.12))
    elif kind == 'caption':  # a dark bar over 8-12% of the height: most of the bottom row
        share = rng.uniform(0.08, 0.12) * _SIDE
        values[-1] = values[-1] * (1 - share) + rng.uniform(0, 60, size=3) * share
    return _as_bytes(values + rng.normal(0, _RECOMPRESSED, size=values.shape)).ravel()


def one_style(count, seed, planted_share=PLANTED_SHARE, min_side=96, max_side=320, aspect=(0.6, 1.7)):
    """As ``synthetic``, from ``count`` images drawn in one style (``imgrec.samples.generate.draw_image``,
    sizes as its ``write_images`` draws them), saved and decoded; thumbnails as bytes rows."""
    from imgrec.samples.generate import CLASSES, draw_image  # pylint: disable=import-outside-toplevel
    from imgrec.samples.near_duplicates import make_twin  # pylint: disable=import-outside-toplevel
    from imgrec.imaging import image_ops  # pylint: disable=import-outside-toplevel
    target = image_ops.parse_image_size('224')
    rng = random.Random(seed)
    copies = int(count * planted_share)
    originals = count - copies
    twin_of = dict(zip(rng.sample(range(originals), copies), range(copies)))
    sources, hashes, thumbnails, planted = [], [], [], {}

    def add(source, data):
        image = image_ops.decode(data, target)[0]
        sources.append(source)
        hashes.append(ph.perceptual_hashes(image))
        thumbnails.append(np.frombuffer(image.convert('RGB').resize((_SIDE, _SIDE), Image.Resampling.BOX).tobytes(),
                                        dtype=np.uint8))

    for i in range(originals):
        kind = CLASSES[i % len(CLASSES)]
        long_side = rng.randint(min_side, max_side)
        ratio = rng.uniform(*aspect)
        width, height = (long_side, round(long_side / ratio)) if ratio >= 1 else (round(long_side * ratio), long_side)
        image = draw_image(kind, max(width, 8), max(height, 8), rng)
        add(f'{kind}/{i:06d}.jpg', _saved(image, 92))
        if i in twin_of:
            n = twin_of[i]
            transform = TRANSFORMS[n % len(TRANSFORMS)]
            twin, _, quality = make_twin(image, transform, random.Random(rng.getrandbits(64)))
            add(f'{kind}/twin_{n:06d}.jpg', _saved(twin, quality))
            planted[tuple(sorted((sources[-2], sources[-1])))] = transform
    return sources, np.array(hashes, dtype=np.uint64), np.array(thumbnails), planted


def _saved(image, quality):
    """The bytes of ``image`` saved as JPEG at ``quality``, or as PNG for None."""
    out = io.BytesIO()
    image.save(out, format='JPEG', quality=quality) if quality else image.save(out, format='PNG')
    return out.getvalue()


# -- the grouping, in memory -----------------------------------------------------------------------------

def group_in_memory(sources, hashes, thumbnails, threshold, timings=None):
    """The grouping of ``imgrec.transforms.near_duplicate_groups`` without Beam. ``sources``: names; ``hashes``:
    a uint64 array, one row of ``perceptual_hash.HASHES`` an image (or one hash an image); ``thumbnails``: the colour fields, _BYTES bytes (or uint8 rows) each, in the same order.

    Returns a dict: ``leader_of`` {source: leader} of every linked image (what ``FindGroups`` yields as
    Node.group), ``candidates`` [(a, b, distance)], ``links`` (the confirmed ones), ``components``
    [[source, ...]] and ``compared`` (pairs of hashes compared). ``timings``: a dict to which CPU
    seconds of each phase are added."""
    timings = {} if timings is None else timings
    hashes = np.asarray(hashes, dtype=np.uint64)
    index_of = {source: i for i, source in enumerate(sources)}

    clock = time.process_time()
    hashes = hashes.reshape(len(sources), -1)
    candidates = [(*sorted((sources[i], sources[j])), distance) for i, j, distance in
                  hash_neighbours.nearest_pairs(hashes, threshold, NEIGHBOURS).tolist()]
    compared = len(sources) * (len(sources) - 1) // 2
    timings['nearest by hash (hash_neighbours)'] = (timings.get('nearest by hash (hash_neighbours)', 0.0)
                                                    + time.process_time() - clock)

    clock = time.process_time()
    pictures, links = {}, []
    for a, b, distance in candidates:
        first, second = (_picture(pictures, thumbnails, index_of[source]) for source in (a, b))
        if picture_check.same_picture(first, second):
            links.append((a, b, distance, picture_check.similarity(first, second)))
    timings['confirm (picture_check.same_picture)'] = (timings.get('confirm (picture_check.same_picture)', 0.0)
                                                       + time.process_time() - clock)
    timings['candidates checked'] = timings.get('candidates checked', 0) + len(candidates)

    clock = time.process_time()
    neighbours = collections.defaultdict(set)
    for a, b, distance, similarity in links:
        neighbours[a].add((b, distance, similarity))
        neighbours[b].add((a, distance, similarity))
    relabel = join_labels((a, b) for a, b, *_ in links)
    components = collections.defaultdict(dict)
    for source in sorted(neighbours):
        components[relabel.get(source, source)][source] = tuple(sorted(neighbours[source]))
    leader_of = {}
    for component in components.values():
        leader_of.update(bounded_groups(component)[0])
    timings['components and groups'] = timings.get('components and groups', 0.0) + time.process_time() - clock
    return dict(leader_of=leader_of, candidates=candidates, links=links,
                components=[sorted(component) for component in components.values()], compared=compared)


def _thumbnail(thumbnails, index):
    thumbnail = thumbnails[index]
    return thumbnail.tobytes() if isinstance(thumbnail, np.ndarray) else thumbnail


def _picture(pictures, thumbnails, index):
    """The check's Picture of image ``index``: its 8x8 colour field enlarged (bilinear) to what a build would
    decode; made once, for candidates only (a build reads and decodes the record instead)."""
    if index not in pictures:
        field = Image.frombytes('RGB', (_SIDE, _SIDE), _thumbnail(thumbnails, index))
        pictures[index] = picture_check.from_image(field.resize((2 * picture_check.SIDE,) * 2, Image.Resampling.BILINEAR))
    return pictures[index]


# -- what is measured ------------------------------------------------------------------------------------

def measure_grouping(kind, count, seed):
    """One size: inputs made, grouped, and every figure of the table (a dict)."""
    clock, wall = time.process_time(), time.perf_counter()
    sources, hashes, thumbnails, planted = (synthetic if kind == 'hashes' else one_style)(count, seed)
    made = time.process_time() - clock
    print(f'  {kind} {count}: inputs made in {made:.1f} s CPU ({time.perf_counter() - wall:.1f} s wall)',
          file=sys.stderr, flush=True)
    threshold = ph.MAX_THRESHOLD
    timings = {}
    clock, wall = time.process_time(), time.perf_counter()
    result = group_in_memory(sources, hashes, thumbnails, threshold, timings)
    cpu, wall = time.process_time() - clock, time.perf_counter() - wall
    leader_of = result['leader_of']
    members = collections.Counter(leader_of.values())
    grouped = {source for source, leader in leader_of.items() if members[leader] > 1}
    in_planted = {source for pair in planted for source in pair}
    false_candidates = sum(1 for a, b, _ in result['candidates'] if (a, b) not in planted)
    false_links = sum(1 for a, b, *_ in result['links'] if (a, b) not in planted)
    found = [pair for pair in planted if pair[0] in leader_of and leader_of[pair[0]] == leader_of.get(pair[1])]
    candidate_pairs = {(a, b) for a, b, _ in result['candidates']}
    missed = collections.Counter(planted[pair] for pair in planted if pair not in set(found))
    n = len(sources)
    return dict(
        kind=kind, hashes=n, threshold=threshold,
        compared=result['compared'], candidates=len(result['candidates']), links=len(result['links']),
        false_candidates=false_candidates, false_links=false_links,
        false_candidates_per_image=2 * false_candidates / n, false_links_per_image=2 * false_links / n,
        chance_per_image=(n - 1) * _chance(threshold),
        planted=len(planted), planted_candidates=sum(1 for pair in planted if pair in candidate_pairs),
        planted_found=len(found), missed=dict(missed),
        largest_group=max(members.values(), default=0),
        largest_component=max((len(c) for c in result['components']), default=0),
        groups=sum(1 for size in members.values() if size > 1),
        alone_leaders=sum(1 for size in members.values() if size == 1),
        grouped=len(grouped), grouped_not_planted=len(grouped - in_planted), distinct=n - len(in_planted),
        cpu_seconds=cpu, wall_seconds=wall, inputs_cpu_seconds=made, timings=timings,
        distances=unrelated_distances(hashes, sources, planted, threshold))


def _chance(threshold):
    """The chance that two hashes of independent fair bits are within ``threshold``."""
    return sum(math.comb(ph.BITS, k) for k in range(threshold + 1)) / 2 ** ph.BITS


def unrelated_distances(hashes, sources, planted, threshold, limit=20_000):
    """Distances of every pair of the first ``limit`` whole-image hashes but planted ones: mean, sd, pairs
    within the threshold, and what independent fair bits give (mean 32, sd 4, ``chance``)."""
    values = np.asarray(hashes[:limit], dtype=np.uint64).reshape(min(limit, len(hashes)), -1)[:, 0]
    histogram = np.zeros(ph.BITS + 1, dtype=np.int64)
    for start in range(len(values) - 1):
        histogram += np.bincount(np.bitwise_count(values[start + 1:] ^ values[start]), minlength=ph.BITS + 1)
    index_of = {source: i for i, source in enumerate(sources[:limit])}
    for a, b in planted:
        if a in index_of and b in index_of:
            histogram[ph.distance(int(values[index_of[a]]), int(values[index_of[b]]))] -= 1
    pairs = int(histogram.sum())
    k = np.arange(ph.BITS + 1)
    mean = float((histogram * k).sum() / pairs)
    sd = math.sqrt(float((histogram * (k - mean) ** 2).sum() / pairs))
    return dict(images=len(values), pairs=pairs, mean=mean, sd=sd, within=int(histogram[:threshold + 1].sum()),
                within_chance=pairs * _chance(threshold))


# -- the report ------------------------------------------------------------------------------------------

COLUMNS = ('corpus', 'hashes', 'threshold', 'candidates', 'links', 'false candidates / image',
           'false links / image', 'recall (planted in one group)', 'largest group', 'largest component',
           'groups', 'grouped, not planted', 'CPU s / 1,000 images', 'peak MB (tree)')


def row(run):
    corpus = 'coin-flip hashes' if run['kind'] == 'hashes' else 'one-style renders'
    return (corpus, f"{run['hashes']:,}", str(run['threshold']), f"{run['candidates']:,}", f"{run['links']:,}",
            f"{run['false_candidates_per_image']:.4f}", f"{run['false_links_per_image']:.5f}",
            f"{run['planted_found'] / max(run['planted'], 1):.1%} ({run['planted_found']}/{run['planted']})",
            str(run['largest_group']), str(run['largest_component']), f"{run['groups']:,}",
            f"{run['grouped_not_planted']} ({run['grouped_not_planted'] / run['distinct']:.2%})",
            f"{run['cpu_seconds'] / run['hashes'] * 1000:.3f}", f"{run['peak_tree'] / 2**20:.0f}")


def report(runs):
    print()
    print('| ' + ' | '.join(COLUMNS) + ' |')
    print('|' + ' --- |' * len(COLUMNS))
    for run in runs:
        print('| ' + ' | '.join(row(run)) + ' |')
    print()
    for run in runs:
        d = run['distances']
        print(f"{run['kind']} {run['hashes']:,}: {run['compared']:,} comparisons "
              f"({run['compared'] / run['hashes']:.0f} an image), grouping {run['cpu_seconds']:.1f} s CPU / {run['wall_seconds']:.1f} s wall "
              f"(inputs {run['inputs_cpu_seconds']:.1f} s CPU): "
              + ', '.join(f'{name} {seconds:.1f}' for name, seconds in run['timings'].items()
                          if name != 'candidates checked'))
        checked = run['timings'].get('candidates checked', 0)
        confirming = run['timings'].get('confirm (picture_check.same_picture)', 0.0)
        print(f"    pixel check: {checked:,} candidates, {confirming / max(checked, 1) * 1e6:.0f} us CPU each "
              f"(pictures made once an image, included)")
        print(f"    planted pairs within the threshold {run['planted_candidates']}/{run['planted']}, "
              f"missed by transform {run['missed'] or 'none'}; false candidates {run['false_candidates']:,} "
              f"(coin flips: {run['chance_per_image'] * run['hashes'] / 2:,.0f}), false links {run['false_links']:,}; "
              f"leaders left alone {run['alone_leaders']}")
        print(f"    unrelated distances over {d['images']:,} images ({d['pairs']:,} pairs): mean {d['mean']:.2f}, "
              f"sd {d['sd']:.2f} (coin flips: 32, 4.00); within {run['threshold']}: {d['within']:,} "
              f"(coin flips: {d['within_chance']:,.1f})")
    by_kind = collections.defaultdict(list)
    for run in runs:
        by_kind[run['kind']].append(run)
    for kind, sized in by_kind.items():
        if len(sized) > 1:
            small, large = min(sized, key=lambda r: r['hashes']), max(sized, key=lambda r: r['hashes'])
            print(f"\nlargest group, {kind}: {small['largest_group']} at {small['hashes']:,} against "
                  f"{large['largest_group']} at {large['hashes']:,} "
                  f"({large['hashes'] / small['hashes']:.0f}x the count); "
                  f"largest component {small['largest_component']} against {large['largest_component']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hashes', default='20000,100000', help='sizes of coin-flip hash sets, comma-separated')
    parser.add_argument('--one_style', default='2000,20000', help='sizes of one-style rendered corpora')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--json', help='also write every figure to this file')
    parser.add_argument('--_one', nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._one:  # inside the process of one size
        kind, count = args._one
        print(json.dumps(measure_grouping(kind, int(count), args.seed)), flush=True)
        return
    from benchmarks.harness import measure  # pylint: disable=import-outside-toplevel
    sizes = [('hashes', int(n)) for n in args.hashes.split(',') if n] + \
            [('one_style', int(n)) for n in args.one_style.split(',') if n]
    print(f'{os.cpu_count()} core(s); seed {args.seed}; one process a size, grouping on one core', flush=True)
    runs = []
    for kind, count in sizes:
        stdout, measured = measure([sys.executable, '-m', 'benchmarks.near_duplicate_groups', '--_one', kind,
                                    str(count), '--seed', str(args.seed)], stderr=None)
        run = dict(json.loads(stdout.strip().splitlines()[-1]), peak_tree=measured['peak_tree'],
                   process_seconds=measured['seconds'])
        runs.append(run)
        print(f"  {kind} {count}: done, {measured['seconds']:.0f} s, peak {measured['peak_tree'] / 2**20:.0f} MB",
              flush=True)
        if args.json:
            with open(args.json, 'w', encoding='utf-8') as out:
                json.dump(runs, out, indent=1)
    report(runs)


if __name__ == '__main__':
    main()
