"""Do the split shares hold, with default options, on corpora the dealing rule was not tuned to?

    python benchmarks/split_shares.py [--only NAME ...] [--image_size 64]

Builds each corpus as a user would (``build-dataset``, default runner and options but the splits),
then refreshes it with 10% more images, and prints for each: every split's share against the share
asked, the near-duplicate groups (how many, the largest, distinct images grouped), planted pairs kept
together where the corpus has them, how many published images the refresh moved (the rule says none),
and the wall time and peak memory of the first build's process tree. Corpora (kept in
benchmarks/out, or IMGREC_BENCH_CACHE): the demo's (4 classes x 160), 2,000 distinct one-style renders,
a mixed corpus, one class only, tiny and huge classes, the planted photo corpus, and 10x the demo.
"""
import argparse
import collections
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import harness  # noqa: E402
from imgrec.contract import layout  # noqa: E402

SPLITS = 'train=80,validation=20'


def _demo(root, per_class, seed=0, classes=None):
    from imgrec.samples.generate import CLASSES, write_images  # pylint: disable=import-outside-toplevel
    write_images(root, per_class, seed=seed, classes=tuple(classes or CLASSES))
    return []


def _one_style(root, count, mixed=False, seed=0):
    from imgrec.samples.one_style import write_corpus  # pylint: disable=import-outside-toplevel
    write_corpus(root, count, seed=seed, mixed=mixed, min_side=320, max_side=640, processes=2)
    return []


def _one_class(root, count, seed=0):
    from imgrec.samples.generate import write_images  # pylint: disable=import-outside-toplevel
    write_images(root, count, seed=seed, classes=('circle',))
    return []


def _tiny_and_huge(root, seed=0):
    from imgrec.samples.generate import write_images  # pylint: disable=import-outside-toplevel
    write_images(root, 1200, seed=seed, classes=('circle',))
    write_images(root, 3, seed=seed + 1, classes=('square',))
    write_images(root, 1, seed=seed + 2, classes=('triangle',))
    return []


def _planted(root, seed=0):
    from imgrec.samples.near_duplicates import write_corpus  # pylint: disable=import-outside-toplevel
    return write_corpus(root, 120, 60, seed=seed)


CORPORA = {
    'demo': lambda root: _demo(root, 160),
    'one_style_2000': lambda root: _one_style(root, 2000),
    'mixed_2000': lambda root: _one_style(root, 2000, mixed=True),
    'one_class': lambda root: _one_class(root, 600),
    'tiny_and_huge': _tiny_and_huge,
    'planted': _planted,
    'demo_x10': lambda root: _demo(root, 1600),
}


def _corpus(name):
    root = os.path.join(harness.CACHE, f'shares-{name}')
    pairs_file = root + '.pairs.json'
    if not os.path.isdir(root):
        pairs = CORPORA[name](root)
        with open(pairs_file, 'w', encoding='utf-8') as stream:
            json.dump(pairs, stream)
    with open(pairs_file, encoding='utf-8') as stream:
        return root, json.load(stream)


def _grow(root, name):
    """A copy of ``root`` with 10% more images (new names, drawn from another seed)."""
    grown = os.path.join(harness.CACHE, f'shares-{name}-grown')
    if not os.path.isdir(grown):
        shutil.copytree(root, grown)
        extra = os.path.join(harness.CACHE, f'shares-{name}-extra')
        count = max(1, len(harness.listed(root)) // 10)
        if name in ('one_style_2000', 'mixed_2000'):
            _one_style(extra, count, mixed=name == 'mixed_2000', seed=99)
        elif name == 'planted':
            from imgrec.samples.near_duplicates import write_corpus  # pylint: disable=import-outside-toplevel
            classes = sorted(os.listdir(root))
            write_corpus(extra, max(1, count // len(classes)), 0, seed=99, classes=tuple(classes))
        else:  # the corpus's own classes, drawn as the demo draws
            classes = sorted(os.listdir(root))
            _demo(extra, max(1, count // len(classes)), seed=99, classes=classes)
        for relative in harness.listed(extra):
            target = os.path.join(grown, os.path.dirname(relative), 'new_' + os.path.basename(relative))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.move(os.path.join(extra, relative), target)
        shutil.rmtree(extra)
    return grown


def _index(version_dir, document):
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    rows = {}
    for name in document['index']['files']:
        for row in pq.read_table(os.path.join(version_dir, name), columns=['source', 'split']).to_pylist():
            rows[row['source']] = row['split']
    return rows


def _document(version_dir):
    with open(os.path.join(version_dir, layout.DATASET_JSON), encoding='utf-8') as stream:
        return json.load(stream)


def _groups(version_dir):
    members = collections.defaultdict(set)
    with open(os.path.join(version_dir, layout.NEAR_DUPLICATES_JSONL), encoding='utf-8') as stream:
        for line in stream:
            row = json.loads(line)
            members[row['group']].add(row['source'])
    return members


def measure(name, image_size):
    root, pairs = _corpus(name)
    output = os.path.join(harness.CACHE, f'shares-{name}-built')
    shutil.rmtree(output, ignore_errors=True)
    common = ['--output', output, '--image_size', str(image_size), '--splits', SPLITS]
    first = harness.job(['--input', root, '--version', 'v1', *common])
    v1 = _document(first['version_dir'])
    before = _index(first['version_dir'], v1)
    groups = _groups(first['version_dir'])
    group_of = {source: group for group, members in groups.items() for source in members}
    planted = {source for pair in pairs for source in (pair['original'], pair['twin'])}
    kept = sum(1 for pair in pairs if before.get(pair['original']) == before.get(pair['twin']))
    found = sum(1 for pair in pairs if pair['original'] in group_of
                and group_of[pair['original']] == group_of.get(pair['twin']))
    distinct_grouped = sum(1 for source in group_of if source not in planted)
    refreshed = harness.job(['--input', _grow(root, name), '--version', 'v2', *common])
    v2 = _document(refreshed['version_dir'])
    after = _index(refreshed['version_dir'], v2)
    moved = sum(1 for source, split in before.items() if source in after and after[source] != split)
    shares = {split: (info['share'], info['requested_share']) for split, info in v1['splits'].items()}
    shares2 = {split: info['share'] for split, info in v2['splits'].items()}
    near = v1['near_duplicates']
    return {
        'corpus': name, 'images': len(before), 'shares': shares, 'refreshed_shares': shares2,
        'groups': near['groups'], 'largest_group': near['largest_group'],
        'distinct_grouped': distinct_grouped / max(1, len(before) - len(planted)),
        'planted_pairs': len(pairs), 'found': found, 'kept_together': kept,
        'published_moved': moved, 'refresh_images': len(after),
        'seconds': first['seconds'], 'peak_tree_mb': first['peak_tree'] / 1e6,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--only', nargs='*', choices=sorted(CORPORA), default=list(CORPORA))
    parser.add_argument('--image_size', type=int, default=64)
    args = parser.parse_args(argv)
    print('| corpus | images | train share (asked) | validation share (asked) | groups | largest | distinct '
          'grouped | planted pairs found / kept in one split | refresh +10%: published moved | refreshed '
          'shares | s | peak MB |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for name in args.only:
        row = measure(name, args.image_size)
        train, validation = row['shares']['train'], row['shares']['validation']
        planted = f"{row['found']} / {row['kept_together']} of {row['planted_pairs']}" if row['planted_pairs'] else '-'
        print(f"| {name} | {row['images']} | {100 * train[0]:.1f}% ({100 * train[1]:.0f}%) | "
              f"{100 * validation[0]:.1f}% ({100 * validation[1]:.0f}%) | {row['groups']} | {row['largest_group']} | "
              f"{100 * row['distinct_grouped']:.2f}% | {planted} | {row['published_moved']} of {row['images']} | "
              f"{100 * row['refreshed_shares']['train']:.1f}/{100 * row['refreshed_shares']['validation']:.1f} | "
              f"{row['seconds']:.0f} | {row['peak_tree_mb']:.0f} |", flush=True)


if __name__ == '__main__':
    main()
