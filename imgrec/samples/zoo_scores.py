"""Scores a build of a zoo corpus against its ground truth: issue 39's targets, per style.

    score(corpus, version_dir, build_succeeded=True) -> Score

Reads three files of the version (or of a failed build's staging folder, where they exist):
- ``near_duplicates.jsonl``: ``source`` and ``group`` of each line, and nothing else (``group_row``: the
  one place to change if the file's fields change);
- ``quarantine.jsonl``: ``source`` and ``reason``;
- the record index (``index/*.parquet``): the columns ``source`` and ``split``.

A *family* is a distinct image with its planted copies. An image is "distinct grouped" when its family
shares a group with another family: the check took two distinct images for copies. A planted pair is
found when both images are in one group; it is "across splits" when they were written to two splits.
No Beam and no build needed: a test can score a hand-made version folder.
"""
import collections
import dataclasses
import glob
import json
import os

from imgrec.contract import index, layout
from imgrec.samples.zoo import Corpus
from imgrec.samples.zoo_edits import COMBINED, SINGLE

# Issue 39's targets, per style, with default options.
MAX_QUARANTINED = 0
MAX_GROUPED_SHARE = 0.005
MIN_SINGLE_RECALL = 0.97
MIN_COMBINED_RECALL = 0.90
MAX_PAIRS_ACROSS_SPLITS = 0


@dataclasses.dataclass
class Score:
    """What a build did to one zoo corpus. Counts of distinct images unless said; the lists name
    sources, so a failing target can be looked at."""
    style: str
    images: int                      # distinct images in the corpus
    build_succeeded: bool
    quarantined: int                 # distinct images quarantined, for any reason
    copies_quarantined: int          # planted copies quarantined
    grouped: int                     # distinct images whose family shares a group with another family
    single_found: int                # planted pairs by one edit, same label, in one group
    single_total: int
    combined_found: int              # planted pairs by two edits, same label, in one group
    combined_total: int
    cross_label_found: int           # planted pairs under two labels, in one group
    cross_label_total: int
    pairs_across_splits: int         # planted pairs (any) written to two splits
    quarantine_reasons: dict = dataclasses.field(default_factory=dict)   # reason -> distinct images
    missed: dict = dataclasses.field(default_factory=dict)               # edit -> planted pairs not found
    false_groups: list = dataclasses.field(default_factory=list)         # groups mixing families: [[source, ...]]
    across: list = dataclasses.field(default_factory=list)               # [[original, copy]] in two splits

    @property
    def grouped_share(self) -> float:
        return self.grouped / self.images if self.images else 0.0

    @property
    def single_recall(self) -> float:
        return self.single_found / self.single_total if self.single_total else 1.0

    @property
    def combined_recall(self) -> float:
        return self.combined_found / self.combined_total if self.combined_total else 1.0

    def failures(self) -> list[str]:
        """The targets this build missed, one line each; empty when it met them all."""
        failed = []
        if not self.build_succeeded:
            failed.append('the build failed')
        if self.quarantined > MAX_QUARANTINED:
            failed.append(f'{self.quarantined} distinct images quarantined ({self.quarantine_reasons})')
        if self.grouped_share > MAX_GROUPED_SHARE:
            failed.append(f'{self.grouped} of {self.images} distinct images grouped ({self.grouped_share:.2%})')
        if self.single_recall < MIN_SINGLE_RECALL:
            failed.append(f'single edits found {self.single_found}/{self.single_total} ({self.single_recall:.1%})')
        if self.combined_recall < MIN_COMBINED_RECALL:
            failed.append(f'combined edits found {self.combined_found}/{self.combined_total} ({self.combined_recall:.1%})')
        if self.pairs_across_splits > MAX_PAIRS_ACROSS_SPLITS:
            failed.append(f'{self.pairs_across_splits} planted pairs in two splits')
        return failed


def group_row(row: dict) -> tuple[str, str]:
    """(group, source) of one ``near_duplicates.jsonl`` line: the only fields the scorer reads from it."""
    return str(row['group']), row['source']


def _jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as stream:
        return [json.loads(line) for line in stream if line.strip()]


def read_groups(version_dir: str) -> dict[str, str]:
    """{source: group} of the images the build listed as near-duplicates."""
    return {source: group for group, source in map(group_row, _jsonl(os.path.join(version_dir, layout.NEAR_DUPLICATES_JSONL)))}


def read_quarantine(version_dir: str) -> dict[str, str]:
    """{source: reason} of the quarantined inputs."""
    return {row['source']: row['reason'] for row in _jsonl(os.path.join(version_dir, layout.QUARANTINE_JSONL))}


def read_splits(version_dir: str) -> dict[str, str]:
    """{source: split} of the written records, from the record index (empty if it has none)."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    splits: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(version_dir, layout.INDEX_DIR, '*.parquet'))):
        table = pq.read_table(path, columns=[index.SOURCE, index.SPLIT])
        splits.update(zip(table.column(index.SOURCE).to_pylist(), table.column(index.SPLIT).to_pylist()))
    return splits


def latest_version(output: str) -> str:
    """The folder of the version ``output/LATEST`` names: where a successful build's files are."""
    with open(os.path.join(output, layout.LATEST), encoding='utf-8') as stream:
        return os.path.join(output, stream.read().strip())


def score(corpus: Corpus, version_dir: str, build_succeeded: bool = True) -> Score:
    """Scores the build that wrote ``version_dir`` from ``corpus``'s folder (the index's sources are
    relative to it, as the ground truth's are)."""
    groups, quarantine, splits = read_groups(version_dir), read_quarantine(version_dir), read_splits(version_dir)
    family = {image['source']: image['source'] for image in corpus.images}
    family.update({pair['copy']: pair['original'] for pair in corpus.pairs})
    members = collections.defaultdict(set)
    for source, group in groups.items():
        members[group].add(source)
    mixed = [sorted(sources) for sources in members.values() if len({family.get(s, s) for s in sources}) > 1]
    grouped = {family.get(source, source) for sources in mixed for source in sources} & {i['source'] for i in corpus.images}
    originals = {image['source'] for image in corpus.images}
    reasons = collections.Counter(reason for source, reason in quarantine.items() if source in originals)
    found: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    missed: collections.Counter[str] = collections.Counter()
    across: list[list[str]] = []
    for pair in corpus.pairs:
        kind = 'cross_label' if pair['cross_label'] else pair['kind']
        total[kind] += 1
        original, copy = pair['original'], pair['copy']
        if original in groups and groups[original] == groups.get(copy):
            found[kind] += 1
        else:
            missed[pair['edit']] += 1
        if original in splits and copy in splits and splits[original] != splits[copy]:
            across.append([original, copy])
    return Score(style=corpus.style, images=len(corpus.images), build_succeeded=build_succeeded,
                 quarantined=sum(reasons.values()),
                 copies_quarantined=sum(1 for pair in corpus.pairs if pair['copy'] in quarantine),
                 grouped=len(grouped), single_found=found[SINGLE], single_total=total[SINGLE],
                 combined_found=found[COMBINED], combined_total=total[COMBINED],
                 cross_label_found=found['cross_label'], cross_label_total=total['cross_label'],
                 pairs_across_splits=len(across), quarantine_reasons=dict(reasons), missed=dict(missed),
                 false_groups=mixed, across=across)


HEADER = ('style', 'images', 'built', 'quarantined', 'grouped', 'single', 'combined', 'cross-label', 'across splits')


def table_row(result: Score) -> tuple[str, ...]:
    """One row of the per-style table, in ``HEADER``'s order."""
    return (result.style, str(result.images), 'yes' if result.build_succeeded else 'FAILED', str(result.quarantined),
            f'{result.grouped} ({result.grouped_share:.1%})',
            f'{result.single_found}/{result.single_total} ({result.single_recall:.0%})',
            f'{result.combined_found}/{result.combined_total} ({result.combined_recall:.0%})',
            f'{result.cross_label_found}/{result.cross_label_total}', str(result.pairs_across_splits))


def format_table(results: list[Score]) -> str:
    """The per-style table as aligned text, with a last column naming the targets each style missed."""
    rows = [HEADER + ('targets',)] + [table_row(r) + ('; '.join(r.failures()) or 'met',) for r in results]
    widths = [max(len(row[k]) for row in rows) for k in range(len(HEADER))]
    return '\n'.join('  '.join(cell.ljust(width) for cell, width in zip(row, widths + [0])).rstrip() for row in rows)
