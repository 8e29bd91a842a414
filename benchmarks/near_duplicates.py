"""Near-duplicates measured: recall and false groups on a generated photo corpus with planted twins, and
the build's throughput with --near_duplicates group against off, in the same run; or, with --check,
the two checks alone (hash and thumbnail, as plain functions, no build) on three corpora.

    python benchmarks/near_duplicates.py [--per_class 400] [--twins 200] [--image_size 224] [--runs 2]
    python benchmarks/near_duplicates.py --check [--per_class 120] [--twins 120] [--distinct 2000]

With --check, each image is decoded as the build decodes it (``--image_size``, 192 by default) and
hashed and thumbnailed, then for a planted corpus (as below, 320 to 800 pixels), ``--distinct``
one-style renders and as many mixed images (``imgrec.samples.one_style``, photo-sized), at the threshold
``threshold_for`` gives each corpus, it prints: recall by transform (a pair is found when its hashes
are within the threshold and ``same_picture`` confirms it), the images with a stranger among their
hash candidates and among their confirmed ones, the most confirmed candidates any image has, and the
cost per image of the thumbnail against the hash's, timed on the same decoded images.

The corpus (``imgrec.samples.near_duplicates``: 5 classes of ``per_class`` photos, 320 to 800 pixels on the long
side, plus ``twins`` planted near-duplicates) is generated once and reused while ``benchmarks/out``
holds it. The job runs as a user runs it (``harness.job``: a process of its own, DirectRunner, one
worker process per core), alternating off and group ``--runs`` times each, so a machine that speeds
up or slows down moves both alike; the ratio uses each mode's total time. It then prints:
- recall (planted pairs in one group), false groups (images grouped with an image not their twin),
  planted pairs across splits, with group and as report would have left them;
- the cost: hashing per image (timed here on decoded images), hash comparisons made in band buckets
  (the job's counter) and their rate here, and the shuffle bytes of the band keys; then the same
  extrapolated to 1.28 M images (comparisons grow with the square of the images).
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from apache_beam.coders import coders
from harness import CACHE, counter, job

from imgrec.contract import counters, layout
from imgrec.imaging import image_ops, perceptual_hash as ph
from imgrec.samples import one_style
from imgrec.samples.near_duplicates import CLASSES, TRANSFORMS, write_corpus
from imgrec.transforms.splits import split_for

IMAGENET = 1_281_167
SPLITS = (('train', 90), ('validation', 10))


def planted_corpus(per_class, twins):
    """(folder, pairs) of the cached corpus, generated on every core the first time."""
    root = os.path.join(CACHE, f'near-duplicates-{per_class}-{twins}')
    if not os.path.isdir(root):
        pairs = write_corpus(root + '.partial', per_class, twins, seed=1, min_side=320, max_side=800,
                             processes=os.cpu_count() or 1)
        with open(root + '.partial.pairs.json', 'w', encoding='utf-8') as out:
            json.dump(pairs, out)
        os.rename(root + '.partial.pairs.json', root + '.pairs.json')
        os.rename(root + '.partial', root)
    with open(root + '.pairs.json', encoding='utf-8') as stream:
        return root, json.load(stream)


def quality(pairs, version_dir, images):
    """(recall, false-group rate, planted pairs across splits as written, as the names alone would split)."""
    with open(os.path.join(version_dir, layout.NEAR_DUPLICATES_JSONL), encoding='utf-8') as stream:
        rows = [json.loads(line) for line in stream]
    group_of = {row['source']: row['group'] for row in rows}
    split_of = {row['source']: row['split'] for row in rows}
    members = collections.defaultdict(set)
    for source, group in group_of.items():
        members[group].add(source)
    twin_of = {p['original']: p['twin'] for p in pairs} | {p['twin']: p['original'] for p in pairs}
    found = [p for p in pairs if p['original'] in group_of and group_of[p['original']] == group_of.get(p['twin'])]
    wrong = {source for source, group in group_of.items() if members[group] - {source, twin_of.get(source)}}
    across = sum(1 for p in found if split_of[p['original']] != split_of[p['twin']])
    by_name = sum(1 for p in pairs if split_for(p['original'], SPLITS) != split_for(p['twin'], SPLITS))
    missed = collections.Counter(p['transform'] for p in pairs if p not in found)
    return len(found) / len(pairs), len(wrong) / images, across, by_name, dict(missed)


def hash_cost(root, names, size):
    """Microseconds to hash one decoded image (decoding not counted), over up to 300 images."""
    decoded = []
    for name in names[:300]:
        with open(os.path.join(root, name), 'rb') as stream:
            decoded.append(image_ops.decode(stream.read(), size)[0])
    start = time.perf_counter()
    for image in decoded:
        ph.perceptual_hash(image)
    return (time.perf_counter() - start) / len(decoded) * 1e6


def comparison_rate(threshold):
    """Hash comparisons a second on one core, in a bucket of 20,000 (what ``pairs_within`` does)."""
    import random  # pylint: disable=import-outside-toplevel
    rng = random.Random(0)
    hashes = [rng.getrandbits(64) for _ in range(20_000)]
    start = time.perf_counter()
    for _ in ph.pairs_within(hashes, threshold):
        pass
    return len(hashes) * (len(hashes) - 1) / 2 / (time.perf_counter() - start)


def band_bytes(names, threshold):
    """Bytes one image puts through the band shuffle: its keyed (hash, source) elements, encoded."""
    coder = coders.FastPrimitivesCoder()
    sample = names[:500]
    total = sum(len(coder.encode(((band, 31), (-2 ** 62, name))))
                for name in sample for band in range(ph.bands_for(threshold)))
    return total / len(sample)


def uniform_comparisons(images, threshold):
    """Comparisons the band buckets hold if every band's values are equally likely: per band of b bits,
    the pairs of images, over 2**b values."""
    pairs = images * (images - 1) / 2
    return sum(pairs / 2 ** (stop - start) for start, stop in ph.band_edges(ph.bands_for(threshold)))


def distinct_corpus(count, mixed):
    """(folder, names) of ``count`` cached distinct images (``imgrec.samples.one_style``, seed 0), generated on
    every core the first time."""
    root = os.path.join(CACHE, f"{'mixed' if mixed else 'one-style'}-{count}-0")
    if not os.path.isdir(root):
        one_style.write_corpus(root + '.partial', count, mixed=mixed, processes=os.cpu_count() or 1)
        os.rename(root + '.partial', root)
    return root, sorted(os.path.join(label, name) for label in os.listdir(root)
                        for name in os.listdir(os.path.join(root, label)))


def hashed(root, names, size, seconds):
    """(hashes, thumbnails) of ``names``, decoded as the build decodes them; adds the seconds spent
    hashing and thumbnailing to ``seconds['hash']`` and ``seconds['thumbnail']``."""
    hashes, thumbnails = [], []
    for name in names:
        with open(os.path.join(root, name), 'rb') as stream:
            image = image_ops.decode(stream.read(), size)[0]
        start = time.perf_counter()
        hashes.append(ph.perceptual_hash(image))
        middle = time.perf_counter()
        thumbnails.append(ph.colour_thumbnail(image))
        seconds['hash'] += middle - start
        seconds['thumbnail'] += time.perf_counter() - middle
    return hashes, thumbnails


def check_quality(label, names, hashes, thumbnails, pairs, seconds):
    """Prints recall by transform and the false candidates of one corpus; adds the seconds of the
    thumbnail checks to ``seconds['check']`` and their count to ``seconds['checks']``."""
    index = {name: i for i, name in enumerate(names)}
    twins = {frozenset((index[p['original']], index[p['twin']])) for p in pairs}
    threshold = ph.threshold_for(len(names))
    candidates = list(ph.pairs_within(hashes, threshold))
    start = time.perf_counter()
    confirmed = [(i, j) for i, j, _ in candidates if ph.same_picture(thumbnails[i], thumbnails[j])]
    seconds['check'] += time.perf_counter() - start
    seconds['checks'] += len(candidates)
    strangers = {image for i, j, _ in candidates if frozenset((i, j)) not in twins for image in (i, j)}
    nearest = min((ph.thumbnail_distance(thumbnails[i], thumbnails[j]) for i, j, _ in candidates
                   if frozenset((i, j)) not in twins), default=float('inf'))
    false = {image for i, j in confirmed if frozenset((i, j)) not in twins for image in (i, j)}
    most = max(collections.Counter(image for pair in confirmed for image in pair).values(), default=0)
    print(f'{label}: {len(names)} images, threshold {threshold}; with a stranger among their hash candidates: '
          f'{len(strangers)} ({len(strangers) / len(names):.1%}); confirmed by same_picture: {len(false)} '
          f'({len(false) / len(names):.2%}); most confirmed candidates of an image: {most}; nearest stranger '
          f'candidate {nearest:.1f} levels')
    if pairs:
        found, total, farthest = collections.Counter(), collections.Counter(), collections.Counter()
        for p in pairs:
            a, b = index[p['original']], index[p['twin']]
            total[p['transform']] += 1
            farthest[p['transform']] = max(farthest[p['transform']], ph.thumbnail_distance(thumbnails[a], thumbnails[b]))
            found[p['transform']] += (ph.distance(hashes[a], hashes[b]) <= threshold
                                      and ph.same_picture(thumbnails[a], thumbnails[b]))
        print(f'  recall {sum(found.values()) / len(pairs):.1%} of {len(pairs)} planted pairs: '
              + ', '.join(f'{kind} {found[kind]}/{total[kind]}' for kind in TRANSFORMS))
        print('  farthest copy from its original, levels: '
              + ', '.join(f'{kind} {farthest[kind]:.1f}' for kind in TRANSFORMS))


def check(args):
    """The --check measurement (module docstring)."""
    size = image_ops.parse_image_size(args.image_size)
    seconds = collections.Counter()
    root, pairs = planted_corpus(args.per_class, args.twins)
    names = sorted(os.path.join(label, name) for label in CLASSES for name in os.listdir(os.path.join(root, label)))
    corpora = [('planted photos', root, names, pairs)]
    corpora += [(f'{label} (distinct)', *distinct_corpus(args.distinct, mixed), [])
                for label, mixed in (('one style', False), ('mixed', True))]
    print(f'decoded for --image_size {args.image_size}; thumbnail check: {ph.THUMBNAIL_BYTES} bytes, '
          f'threshold {ph.THUMBNAIL_THRESHOLD} levels')
    images = 0
    for label, root, names, pairs in corpora:
        check_quality(label, names, *hashed(root, names, size, seconds), pairs, seconds)
        images += len(names)
    print(f"cost an image: hash {seconds['hash'] / images * 1e6:.0f} us, thumbnail "
          f"{seconds['thumbnail'] / images * 1e6:.0f} us ({seconds['thumbnail'] / seconds['hash']:.2f}x the hash); "
          f"a thumbnail check {seconds['check'] / max(seconds['checks'], 1) * 1e6:.0f} us a hash candidate "
          f"({seconds['checks']} candidates)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true', help='the two checks alone on three corpora, no build')
    parser.add_argument('--per_class', type=int, default=None, help='default 400, 120 with --check')
    parser.add_argument('--twins', type=int, default=None, help='default 200, 120 with --check')
    parser.add_argument('--distinct', type=int, default=2000, help='images of each distinct corpus (--check)')
    parser.add_argument('--image_size', default=None, help='default 224, 192 (the build\'s default) with --check')
    parser.add_argument('--runs', type=int, default=2, help='builds of each mode, alternated')
    parser.add_argument('--workers', type=int, default=os.cpu_count())
    args = parser.parse_args()
    args.per_class = args.per_class or (120 if args.check else 400)
    args.twins = args.twins or (120 if args.check else 200)
    args.image_size = args.image_size or ('192' if args.check else '224')
    if args.check:
        check(args)
        return
    root, pairs = planted_corpus(args.per_class, args.twins)
    names = sorted(os.path.join(label, name) for label in CLASSES for name in os.listdir(os.path.join(root, label)))
    images = len(names)
    size = image_ops.parse_image_size(args.image_size)
    print(f'{images} photos ({args.per_class * len(CLASSES)} originals, {len(pairs)} planted twins), 320 to 800 px '
          f'-> {args.image_size}, {args.workers} worker(s), {os.cpu_count()} core(s)')
    output = tempfile.mkdtemp(prefix='near-dup-bench-')
    seconds, runs = collections.defaultdict(list), {}
    try:
        for i in range(args.runs):
            for mode in ('off', 'group'):
                run = job(['--input', root, '--output', os.path.join(output, f'{mode}{i}'), '--image_size',
                           args.image_size, '--version', 'bench', '--splits', 'train=90,validation=10',
                           '--near_duplicates', mode, '--direct_running_mode', 'multi_processing',
                           '--direct_num_workers', str(args.workers)])
                seconds[mode].append(run['seconds'])
                runs[mode] = run
        rate = {mode: images * len(times) / sum(times) for mode, times in seconds.items()}
        print(f"build with --near_duplicates off:   {rate['off']:7.1f} images/s  "
              f"(runs {', '.join(f'{s:.1f}' for s in seconds['off'])} s)")
        print(f"build with --near_duplicates group: {rate['group']:7.1f} images/s  "
              f"(runs {', '.join(f'{s:.1f}' for s in seconds['group'])} s)  = {rate['group'] / rate['off']:.2f}x off")
        recall, false, across, by_name, missed = quality(pairs, runs['group']['version_dir'], images)
        print(f'recall: {recall:.1%} of planted pairs in one group (missed by transform: {missed or "none"}); '
              f'false groups: {false:.2%} of images grouped with an image not their twin')
        print(f'planted pairs across splits: {across} with group; {by_name} of {len(pairs)} by their names alone '
              f'(what report or off would write)')
        threshold, at_scale = ph.threshold_for(images), ph.threshold_for(IMAGENET)
        compared = counter(runs['group'], counters.HASHES_COMPARED)
        skew = compared / uniform_comparisons(images, threshold)
        print(f'hashing: {hash_cost(root, names, size):.0f} us an image; threshold {threshold} of {ph.BITS} bits '
              f'({ph.bands_for(threshold)} bands) for {images} images')
        per_second = comparison_rate(at_scale)
        print(f'comparisons in band buckets: {compared} ({compared / images:.0f} an image), {skew:.2f}x what '
              f'equally likely band values give; {per_second / 1e6:.0f} M a second on one core here')
        expected = uniform_comparisons(IMAGENET, at_scale) * skew
        print(f'at {IMAGENET:,} images: threshold {at_scale} ({ph.bands_for(at_scale)} bands), ~{expected:.2g} '
              f'comparisons ({expected / IMAGENET:.0f} an image) = ~{expected / per_second / 3600:.1f} core-hours; '
              f'band shuffle ~{band_bytes(names, at_scale) * IMAGENET / 1e9:.2f} GB '
              f'({band_bytes(names, at_scale):.0f} bytes an image)')
        print(f'(median of one job: off {statistics.median(seconds["off"]):.1f} s, '
              f'group {statistics.median(seconds["group"]):.1f} s)')
    finally:
        shutil.rmtree(output)


if __name__ == '__main__':
    main()
