"""Near-duplicates measured: recall and false groups on a generated photo corpus with planted twins, and the
build's throughput and peak memory with each --near_duplicate_check against --near_duplicates off, in the same
run; with --zoo, one row a style of the zoo; with --families, pictures saved many times over.

    python benchmarks/near_duplicates.py [--per_class 400] [--twins 200] [--image_size 224] [--runs 2]
    python benchmarks/near_duplicates.py --zoo [--styles digits,pages] [--zoo_per_class 100] [--check exact]
    python benchmarks/near_duplicates.py --families 2000,50 [--image_size 64] [--check exact]

With --zoo, for each style of ``imgrec.samples.zoo`` (``benchmarks/zoo_builds.py``'s cached corpora), a build with
``--check`` (perceptual unless said) and an ``off`` build, alternated ``--runs`` times, each in a process of its
own: the row gives the distinct images quarantined and grouped, the planted single and combined edits found, the
planted pairs in two splits (``imgrec.samples.zoo_scores``), and the time and peak memory (process tree) as ratios
to ``off``'s in the same run. With --families P,C: P small photos each saved C times with the same pixels
(distinct trailing bytes): the families written to two splits, the groups and the links cut, and time and peak
against ``off``. ``benchmarks/near_duplicate_scale.py`` measures the styles at 2,000 to 20,000 images.

The corpus (``imgrec.samples.near_duplicates``: 5 classes of ``per_class`` photos, 320 to 800 pixels on the long
side, plus ``twins`` planted near-duplicates) is generated once and reused while ``benchmarks/out``
holds it. The job runs as a user runs it (``harness.job``: a process of its own, DirectRunner, one
worker process per core), alternating off, exact and perceptual ``--runs`` times each, so a machine that speeds
up or slows down moves all alike; the ratio uses each mode's total time. It then prints each mode's throughput,
time, CPU and peak against off's, and for each check the recall (planted pairs in one group), the false groups
(images grouped with an image not their twin), the planted pairs across splits and the pixel checks made.
"""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zoo_builds
from harness import CACHE, counter, distinct_copies, job, listed

from imgrec.contract import counters, layout
from imgrec.imaging import image_ops, perceptual_hash as ph
from imgrec.samples import zoo, zoo_scores
from imgrec.samples.near_duplicates import CLASSES, write_corpus
from imgrec.transforms.splits import split_for

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
    """Microseconds to hash one decoded image (both hashes; decoding not counted), over up to 300 images."""
    decoded = []
    for name in names[:300]:
        with open(os.path.join(root, name), 'rb') as stream:
            decoded.append(image_ops.decode(stream.read(), size)[0])
    start = time.perf_counter()
    for image in decoded:
        ph.perceptual_hashes(image)
    return (time.perf_counter() - start) / len(decoded) * 1e6


def _build(root, output, mode, image_size, workers, extra=()):
    """One build in a process of its own; ``mode``: off, or a --near_duplicate_check (with --near_duplicates group)."""
    checked = ['--near_duplicates', 'off'] if mode == 'off' else ['--near_duplicate_check', mode]
    args = ['--input', root, '--output', output, '--image_size', image_size, '--version', 'bench',
            '--splits', 'train=90,validation=10', *checked, *extra]
    if workers:
        args += ['--direct_running_mode', 'multi_processing', '--direct_num_workers', str(workers)]
    return job(args)


def zoo_rows(args):
    """The --zoo measurement: one row a style (module docstring)."""
    styles = args.styles.split(',') if args.styles else list(zoo.STYLES)
    print(f'zoo: the corpora of benchmarks/zoo_builds.py (about 1,000 distinct images a style, 5% planted single '
          f'edits, 2.5% combined); built at {args.image_size}, default options against --near_duplicates off, '
          f'{args.runs} build(s) of each, alternated, each in a process of its own')
    head = ('style', 'half', 'images', 'quarantined', 'grouped', 'single', 'combined', 'across', 'time', 'peak',
            'off s', 'off MB')
    print(' '.join(f'{h:>12}' for h in head))
    output = tempfile.mkdtemp(prefix='near-dup-zoo-')
    try:
        for style in styles:
            corpus = zoo_builds.zoo_corpus(style, args.zoo_per_class or zoo_builds.default_per_class(style))
            root = corpus.folder
            runs = collections.defaultdict(list)
            for i in range(args.runs):
                for mode in ('off', args.check):
                    runs[mode].append(_build(root, os.path.join(output, f'{style}-{mode}{i}'), mode, args.image_size,
                                             args.workers))
            runs['group'] = runs.pop(args.check)
            result = zoo_scores.score(corpus, runs['group'][-1]['version_dir'])
            seconds = {mode: sum(run['seconds'] for run in done) for mode, done in runs.items()}
            peak = {mode: max(run['peak_tree'] for run in done) for mode, done in runs.items()}
            row = (style, 'tuning' if style in zoo.TUNING_STYLES else 'check', str(len(corpus.images)),
                   str(result.quarantined), f'{result.grouped_share:.1%}',
                   f'{result.single_found}/{result.single_total}', f'{result.combined_found}/{result.combined_total}',
                   str(result.pairs_across_splits), f"{seconds['group'] / seconds['off']:.2f}x",
                   f"{peak['group'] / peak['off']:.2f}x", f"{seconds['off'] / args.runs:.1f}", f"{peak['off'] / 1e6:.0f}")
            print(' '.join(f'{cell:>12}' for cell in row), flush=True)
            if result.failures():
                print(f"{'':>12} missed: {dict(result.missed)}; {'; '.join(result.failures())}", flush=True)
            shutil.rmtree(os.path.join(output), ignore_errors=True)
            os.makedirs(output, exist_ok=True)
    finally:
        shutil.rmtree(output, ignore_errors=True)


def families(args):
    """The --families measurement: P pictures saved C times each with the same pixels (distinct trailing
    bytes); how many families end in two splits, the largest group and the links cut, and the peak memory
    against --near_duplicates off."""
    pictures, copies = (int(n) for n in args.families.split(','))
    base = os.path.join(CACHE, f'small-photos-{pictures}')
    if not os.path.isdir(base):
        per_class = -(-pictures // len(CLASSES))
        write_corpus(base + '.partial', per_class, 0, seed=2, min_side=96, max_side=200,
                     processes=os.cpu_count() or 1)
        os.rename(base + '.partial', base)
    names = listed(base)[:pictures]
    root = distinct_copies(base, os.path.join(CACHE, f'families-{pictures}x{copies}'), len(names) * copies)
    output = tempfile.mkdtemp(prefix='near-dup-families-')
    try:
        runs = {mode: _build(root, os.path.join(output, mode), mode, args.image_size, args.workers)
                for mode in ('off', args.check)}
        runs['group'] = runs.pop(args.check)
        version = runs['group']['version_dir']
        import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
        splits = {}
        for part in os.listdir(os.path.join(version, 'index')):
            table = pq.read_table(os.path.join(version, 'index', part), columns=['source', 'split'])
            splits.update(zip(table['source'].to_pylist(), table['split'].to_pylist()))
        files = listed(base)
        family_splits = collections.defaultdict(set)
        for source, split in splits.items():
            family_splits[files[int(os.path.basename(source)[:6]) % len(files)]].add(split)
        across = sum(len(found) > 1 for found in family_splits.values())
        with open(os.path.join(version, layout.DATASET_JSON), encoding='utf-8') as stream:
            near = json.load(stream)['near_duplicates']
        print(f'{len(splits)} images written of {len(files)} pictures x {copies} copies, built at {args.image_size}: '
              f'{across} families in two splits; {near["groups"]} groups, largest {near["largest_group"]}, '
              f'{near["links_cut"]} links cut; threshold {near["threshold"]}; candidates confirmed '
              f'{counter(runs["group"], counters.PAIRS_CONFIRMED)}, refused {counter(runs["group"], counters.PAIRS_REFUSED)}')
        print(f"time group/off {runs['group']['seconds'] / runs['off']['seconds']:.2f}x "
              f"({runs['group']['seconds']:.0f} s / {runs['off']['seconds']:.0f} s); peak group/off "
              f"{runs['group']['peak_tree'] / runs['off']['peak_tree']:.2f}x ({runs['group']['peak_tree'] / 1e6:.0f} MB / "
              f"{runs['off']['peak_tree'] / 1e6:.0f} MB)")
    finally:
        shutil.rmtree(output, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--zoo', action='store_true', help='one row a zoo style (imgrec.samples.zoo)')
    parser.add_argument('--styles', default=None, help='with --zoo: styles, comma-separated (default: all)')
    parser.add_argument('--zoo_per_class', type=int, default=None, help='with --zoo: distinct images a class')
    parser.add_argument('--families', default=None, metavar='PICTURES,COPIES',
                        help='pictures saved COPIES times each with the same pixels: families across splits')
    parser.add_argument('--per_class', type=int, default=400)
    parser.add_argument('--twins', type=int, default=200)
    parser.add_argument('--image_size', default=None, help='default 224; 64 with --zoo and --families')
    parser.add_argument('--runs', type=int, default=2, help='builds of each mode, alternated')
    parser.add_argument('--check', choices=('exact', 'perceptual'), default='perceptual',
                        help='with --zoo and --families: the --near_duplicate_check measured against off')
    parser.add_argument('--workers', type=int, default=os.cpu_count(), help='0: the runner\'s own choice')
    args = parser.parse_args()
    args.image_size = args.image_size or ('64' if args.zoo or args.families else '224')
    if args.zoo:
        zoo_rows(args)
        return
    if args.families:
        families(args)
        return
    root, pairs = planted_corpus(args.per_class, args.twins)
    names = sorted(os.path.join(label, name) for label in CLASSES for name in os.listdir(os.path.join(root, label)))
    images = len(names)
    size = image_ops.parse_image_size(args.image_size)
    print(f'{images} photos ({args.per_class * len(CLASSES)} originals, {len(pairs)} planted twins), 320 to 800 px '
          f'-> {args.image_size}, {args.workers} worker(s), {os.cpu_count()} core(s)')
    output = tempfile.mkdtemp(prefix='near-dup-bench-')
    modes = ('off', 'exact', 'perceptual')
    seconds, cpu, runs = collections.defaultdict(list), collections.defaultdict(list), {}
    try:
        for i in range(args.runs):
            for mode in modes:
                run = _build(root, os.path.join(output, f'{mode}{i}'), mode, args.image_size, args.workers)
                seconds[mode].append(run['seconds'])
                cpu[mode].append(run['cpu_seconds'])
                runs[mode] = run
        rate = {mode: images * len(times) / sum(times) for mode, times in seconds.items()}
        for mode in modes:
            print(f"build, {mode:>10}: {rate[mode]:7.1f} images/s (runs {', '.join(f'{s:.1f}' for s in seconds[mode])} s)"
                  f" = {rate[mode] / rate['off']:.2f}x off's throughput, {sum(seconds[mode]) / sum(seconds['off']):.2f}x "
                  f"its time; CPU {sum(cpu[mode]) / sum(cpu['off']):.2f}x; peak {runs[mode]['peak_tree'] / 1e6:.0f} MB "
                  f"= {runs[mode]['peak_tree'] / runs['off']['peak_tree']:.2f}x")
        for mode in ('exact', 'perceptual'):
            recall, false, across, by_name, missed = quality(pairs, runs[mode]['version_dir'], images)
            print(f'{mode}: recall {recall:.1%} of planted pairs in one group (missed by transform: {missed or "none"}); '
                  f'false groups {false:.2%} of images grouped with an image not their twin; planted pairs across '
                  f'splits {across} ({by_name} of {len(pairs)} by their names alone); pixel checks '
                  f'{counter(runs[mode], counters.PAIRS_CONFIRMED)} confirmed, '
                  f'{counter(runs[mode], counters.PAIRS_REFUSED)} refused')
        print(f'hashing: {hash_cost(root, names, size):.0f} us an image (decoding not counted)')
    finally:
        shutil.rmtree(output)

if __name__ == '__main__':
    main()
