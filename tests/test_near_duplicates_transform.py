"""The grouping and dealing transforms on hand-made records: Beam's TestPipeline (DirectRunner) and
assert_that."""
import collections
import hashlib
import os
import pickle
import random
import tempfile

import io

import apache_beam as beam
import numpy as np
import pytest
from PIL import Image
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.contract import features as F, tfrecord
from imgrec.contract.example import encode_example
from imgrec.contract.reasons import NEAR_DUPLICATE_CONFLICT
from imgrec.console.errors import build_failure_message
from imgrec.imaging import perceptual_hash as ph
from imgrec.transforms.elements import RecordRef
from imgrec.transforms.near_duplicate_candidates import EXACT, NEIGHBOURS, PERCEPTUAL
from imgrec.transforms.near_duplicate_groups import FindGroups
from imgrec.transforms.near_duplicates import GROUP, OFF, REPORT, NearDuplicates
from imgrec.transforms.splits import apportion, split_for

WEIGHTS = (('train', 50), ('validation', 50))
THRESHOLD = ph.MAX_THRESHOLD
LINK = THRESHOLD // 2 + 1
_IN_MEMORY = ['--direct_running_mode=in_memory']


_SPILL = os.path.join(tempfile.mkdtemp(prefix='near-dup-frames-'), 'spill')
_FRAMES = {}
_DIGESTS = {}  # look -> the sha256 of its JPEG, as a build records it (encoded_sha256)


def _frame(source, look):
    """(file, offset, length) of a TFRecord frame holding ``source``'s Example, whose JPEG is ``look``'s own picture
    (random blocks: another look's never agrees with it), appended to one spill file the first time it is asked
    for."""
    if (source, look) not in _FRAMES:
        rng = np.random.default_rng(abs(hash_of(look)) % (2 ** 32))
        blocks = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        image = Image.fromarray(blocks).resize((64, 64), Image.Resampling.NEAREST)
        data = io.BytesIO()
        image.save(data, 'JPEG', quality=90)
        features = {F.IMAGE_ENCODED: data.getvalue(), F.SOURCE: source.encode()}
        framed = tfrecord.frame(encode_example(features, {key: F.FEATURES[key] for key in features}))
        with open(_SPILL, 'ab') as out:
            offset = out.tell()
            out.write(framed)
        _FRAMES[source, look] = (_SPILL, offset, len(framed))
        _DIGESTS[look] = hashlib.sha256(data.getvalue()).hexdigest()
    return _FRAMES[source, look]


def hash_of(text):
    return int.from_bytes(text.encode()[:8].ljust(8, b'\0'), 'big') ^ len(text)


def _record(source, value, label=0, published=None, look=None):
    """A record whose frame holds ``look``'s picture (its own source's when None): equal looks confirm a candidate.
    ``value``: its whole image's hash, which its centre's repeats (or a tuple of both)."""
    payload = _frame(source, look or source)
    return RecordRef(source, source, f'class{label}', split_for(source, WEIGHTS), label, 'sha-' + source, 1, None,
                     None, (), *payload, perceptual_hash=None if value is None else ph.to_hex(value if isinstance(value, tuple) else (value, value)),
                     published_split=published, encoded_sha256=_DIGESTS[look or source])


def _flip(value, *bits):
    for bit in bits:
        value ^= 1 << bit
    return value


def _corpus():
    """Far-apart hashes, one pair, one chain of five (each link just over half the threshold, so only
    neighbours are within it), one pair of identical hashes, one pair within the threshold whose
    thumbnails differ, one image just over the threshold from another (a bit in every band), one pair whose
    whole images' hashes are far apart and whose centres' are the same (a caption), and one with no hash."""
    rng = random.Random(3)
    bases = [rng.getrandbits(64) for _ in range(40)]
    records = [_record(f'solo/{i:02d}.jpg', value) for i, value in enumerate(bases[:30])]
    records.append(_record('pair/a.jpg', bases[30], look='pair'))
    records.append(_record('pair/b.jpg', _flip(bases[30], 0, 9, 18), look='pair'))
    chain = bases[31]
    for i in range(5):
        records.append(_record(f'chain/{i}.jpg', chain, look='chain'))
        chain = _flip(chain, *range(i * LINK, (i + 1) * LINK))
    records.append(_record('same/x.jpg', bases[32], look='same'))
    records.append(_record('same/y.jpg', bases[32], look='same'))
    records.append(_record('look/a.jpg', bases[34]))
    records.append(_record('look/b.jpg', _flip(bases[34], 1, 2)))
    records.append(_record('far/a.jpg', bases[33], look='far'))
    records.append(_record('far/b.jpg', _flip(bases[33], *range(THRESHOLD + 1)), look='far'))
    records.append(_record('centre/a.jpg', (bases[35], bases[36]), look='centre'))
    records.append(_record('centre/b.jpg', (_flip(bases[35], *range(0, 64, 2)), bases[36]), look='centre'))
    records.append(_record('nohash.jpg', None))
    return records


LINKED = ({'pair/a.jpg', 'pair/b.jpg'}, {'same/x.jpg', 'same/y.jpg'}, {'centre/a.jpg', 'centre/b.jpg'},
          *({f'chain/{i}.jpg', f'chain/{i + 1}.jpg'} for i in range(4)))
GROUPED = set().union(*LINKED)


def _dump(items, path):
    with open(path, 'wb') as out:
        pickle.dump(items, out)


def _collect(pcolls):
    """{name: list of elements} of each PCollection once the pipeline has run (``run``)."""
    folder = tempfile.mkdtemp()
    paths = {name: os.path.join(folder, name) for name in pcolls}
    for name, pcoll in pcolls.items():
        pcoll | f'List{name}' >> beam.combiners.ToList() | f'Dump{name}' >> beam.Map(_dump, paths[name])

    def run(pipeline):
        pipeline.run().wait_until_finish()
        loaded = {}
        for name, path in paths.items():
            with open(path, 'rb') as stream:
                loaded[name] = pickle.load(stream)
        return loaded
    return run


def _found(records, **options):
    """{source: Node} FindGroups gives ``records`` (with the perceptual check unless ``check`` is given)."""
    p = TestPipeline(argv=_IN_MEMORY)
    run = _collect({'nodes': (p | beam.Create(records) | FindGroups(**({'check': PERCEPTUAL} | options)))['nodes']})
    return dict(linked for _, linked in run(p)['nodes'])


def test_groups_are_the_components_of_confirmed_candidates():
    nodes = _found(_corpus())
    assert set(nodes) == GROUPED  # not the pair the pictures refuse, nor the pair over the threshold
    links = {frozenset((source, other)) for source, node in nodes.items() for other, *_ in node.neighbours}
    assert links == {frozenset(pair) for pair in LINKED}
    # a chain of confirmed links is one group (connected components, not stars), named by its smallest order key
    assert len({nodes[f'chain/{i}.jpg'].group for i in range(5)}) == 1
    assert nodes['pair/a.jpg'].group == nodes['pair/b.jpg'].group and nodes['same/x.jpg'].group == nodes['same/y.jpg'].group
    assert (nodes['pair/a.jpg'].nearest, nodes['pair/a.jpg'].distance) == ('pair/b.jpg', 3)
    assert (nodes['same/y.jpg'].nearest, nodes['same/y.jpg'].distance) == ('same/x.jpg', 0)
    assert nodes['same/y.jpg'].similarity == 1.0 and all(node.cut == () for node in nodes.values())


def test_the_exact_check_links_only_images_that_wrote_the_same_picture():
    """The pictures written must be the same bytes, whatever their hashes: identical hashes are not enough (flat
    pictures share them), and none are needed (the exact check computes none)."""
    records = _corpus() + [_record('flat/a.jpg', 7, look='flat-a'), _record('flat/b.jpg', 7, look='flat-b'),
                           _record('flat/c.jpg', None, look='flat-a')]
    nodes = _found(records, check=EXACT)
    looks = collections.defaultdict(set)
    for record in records:
        looks[record.encoded_sha256].add(record.source)
    assert set(nodes) == set().union(*(sources for sources in looks.values() if len(sources) > 1))
    assert 'flat/b.jpg' not in nodes and len(set(nodes) & {f'chain/{i}.jpg' for i in range(5)}) == 5
    assert nodes['flat/a.jpg'].group == nodes['flat/c.jpg'].group != nodes['same/x.jpg'].group
    assert len({nodes[f'chain/{i}.jpg'].group for i in range(5)}) == 1
    assert (nodes['same/y.jpg'].distance, nodes['same/y.jpg'].similarity) == (0, 1.0)


def test_the_perceptual_check_compares_each_image_with_its_few_nearest_only():
    """A class of one kind (every hash within the threshold of every other) gives at most NEIGHBOURS candidates an
    image, not a pair check for every pair: 60 images whose pictures all agree form one group through them."""
    rng = random.Random(5)
    base = rng.getrandbits(64)
    records = [_record(f'kind/{i:02d}.jpg', _flip(base, *rng.sample(range(64), 6)), look='kind') for i in range(60)]
    nodes = _found(records)
    assert len(nodes) == 60 and len({node.group for node in nodes.values()}) == 1
    links = {frozenset((source, other)) for source, node in nodes.items() for other, *_ in node.neighbours}
    assert len(links) <= 60 * NEIGHBOURS < 60 * 59 // 2
    assert all(len(node.neighbours) >= 1 for node in nodes.values())


def test_a_chain_longer_than_the_rounds_gives_the_same_groups():
    """One round of label passing cannot reach the chain's end: the union-find of unsettled labels does."""
    assert _found(_corpus(), rounds=1) == _found(_corpus(), rounds=3)


def _run(records, *args, **kwargs):
    """{'records': [...], 'near_duplicates': [...], 'summary': dict, 'moves': Counter, 'rejected': [...]}."""
    p = TestPipeline(argv=_IN_MEMORY)
    result = p | beam.Create(records) | NearDuplicates(*args, **({'check': PERCEPTUAL} | kwargs))
    out = _collect({name: result[name] for name in ('records', 'near_duplicates', 'summary', 'moves', 'rejected')})(p)
    moves = collections.Counter()
    for listed, change in out['moves']:
        moves[listed.split] += change
    return dict(out, summary=out['summary'][0], moves=moves)


def _counts(records):
    return collections.Counter(record.split for record in records)


def _accounted(records, out):
    """The moves turn the hash splits of the records into their final splits."""
    before = collections.Counter(record.split for record in records)
    assert {split: before[split] + out['moves'][split] for split in before} == dict(_counts(out['records']))


def test_group_mode_keeps_each_group_in_one_split_and_holds_the_shares():
    records = _corpus()
    out = _run(records, GROUP, WEIGHTS)
    final = {record.source: record.split for record in out['records']}
    assert set(final) == {record.source for record in records}
    assert _counts(out['records']) == apportion(len(records), WEIGHTS)
    rows = {row.source: row for row in out['near_duplicates']}
    assert set(rows) == GROUPED
    by_group = collections.defaultdict(set)
    for row in rows.values():
        by_group[row.group].add(final[row.source])
        assert row.split == final[row.source]
        assert row.moved_from == (split_for(row.source, WEIGHTS) if final[row.source] != split_for(
            row.source, WEIGHTS) else None)
    assert all(len(splits) == 1 for splits in by_group.values())
    _accounted(records, out)
    summary = out['summary']
    assert (summary['mode'], summary['hash'], summary['threshold'], summary['neighbours']) == (
        'group', ph.ALGORITHM, THRESHOLD, NEIGHBOURS)
    assert summary['groups'] == len(by_group) and summary['images'] == len(GROUPED)
    assert summary['pairs'] == len(LINKED) and summary['label_conflicts'] == 0
    assert summary['largest_group'] == max(collections.Counter(row.group for row in rows.values()).values())
    assert summary['pairs_across_splits'] == sum(len({final[s] for s in pair}) > 1 for pair in LINKED)


def test_report_mode_lists_groups_and_deals_every_image_as_off_does():
    records = _corpus()
    report, off = _run(records, REPORT, WEIGHTS), _run(records, OFF, WEIGHTS)
    final = {record.source: record.split for record in report['records']}
    assert final == {record.source: record.split for record in off['records']}
    assert {row.source for row in report['near_duplicates']} == GROUPED
    assert all(row.split == final[row.source] for row in report['near_duplicates'])
    assert report['summary']['pairs_across_splits'] == sum(len({final[s] for s in pair}) > 1 for pair in LINKED)
    assert off['near_duplicates'] == [] and (off['summary']['mode'], off['summary']['hash']) == ('off', None)
    assert _counts(off['records']) == apportion(len(records), WEIGHTS)
    _accounted(records, off)


def test_published_images_keep_their_split_and_new_ones_fill_what_is_lacking():
    """The pair was published in validation (against its hash); a new image joining it follows it; an
    image alone keeps its published split; new images alone fill what the splits lack."""
    rng = random.Random(11)
    value = rng.getrandbits(64)
    published = [_record('p/a.jpg', value, published='validation', look='p'),
                 _record('p/b.jpg', _flip(value, 3), published='validation', look='p'),
                 _record('lone.jpg', rng.getrandbits(64), published='validation')]
    new = [_record('p/new.jpg', _flip(value, 5), look='p')] + [
        _record(f'new/{i}.jpg', rng.getrandbits(64)) for i in range(5)]
    out = _run(published + new, GROUP, WEIGHTS, keep_published=True)
    final = {record.source: record.split for record in out['records']}
    assert all(final[record.source] == 'validation' for record in published)
    assert final['p/new.jpg'] == 'validation'
    assert _counts(out['records']) == {'train': 5, 'validation': 4}
    # Without the same splits (or with --resplit) nothing is kept: the shares alone decide.
    again = _run(published + new, GROUP, WEIGHTS, keep_published=False)
    assert _counts(again['records']) == apportion(9, WEIGHTS)


def test_a_near_duplicate_pair_across_classes_is_kept_and_listed_unless_quarantine_is_asked():
    rng = random.Random(5)
    value = rng.getrandbits(64)
    records = [_record('cat/a.jpg', value, label=0, look='x'), _record('dog/a.jpg', _flip(value, 2), label=1, look='x'),
               *(_record(f'cat/{i}.jpg', rng.getrandbits(64)) for i in range(4))]
    kept = _run(records, GROUP, WEIGHTS)  # the default: both written, in one split, the pair listed
    assert kept['rejected'] == [] and len(kept['records']) == 6
    split = {r.source: r.split for r in kept['records']}
    assert split['cat/a.jpg'] == split['dog/a.jpg']
    assert kept['summary']['pairs_across_labels'] == 1 and kept['summary']['label_conflicts'] == 0
    assert kept['summary']['label_conflict_pairs'] == [{
        'source': 'cat/a.jpg', 'label': 'class0', 'split': split['cat/a.jpg'], 'other': 'dog/a.jpg',
        'other_label': 'class1', 'other_split': split['dog/a.jpg']}]
    assert kept['summary']['conflicts'] == 'keep'
    out = _run(records, GROUP, WEIGHTS, conflicts='quarantine')
    assert sorted((r.source, r.reason) for r in out['rejected']) == [
        ('cat/a.jpg', NEAR_DUPLICATE_CONFLICT), ('dog/a.jpg', NEAR_DUPLICATE_CONFLICT)]
    assert 'dog/a.jpg' in next(r.message for r in out['rejected'] if r.source == 'cat/a.jpg')
    assert len(out['records']) == 4 and out['summary']['label_conflicts'] == 2
    listed = _run(records, REPORT, WEIGHTS)  # only listed: nothing quarantined, the pair counted
    assert listed['rejected'] == [] and listed['summary']['pairs_across_labels'] == 1


def test_shares_that_cannot_be_held_fail_the_build_in_one_line():
    rng = random.Random(8)
    records = [_record(f'old/{i}.jpg', rng.getrandbits(64), published='train') for i in range(8)]
    records += [_record(f'new/{i}.jpg', rng.getrandbits(64)) for i in range(2)]
    with pytest.raises(Exception) as raised:
        _run(records, GROUP, WEIGHTS, keep_published=True)
    message = build_failure_message(raised.value)
    assert message and message.startswith('split train would hold 8 of 10 images (80.0%), asked 50.0%')
    assert '--split_tolerance 30.1 accepts it' in message and '--resplit' in message
    accepted = _run(records, GROUP, WEIGHTS, keep_published=True, tolerance=31)
    assert _counts(accepted['records']) == {'train': 8, 'validation': 2}


def test_pairs_are_counted_once_whether_within_a_group_or_cut_between_two():
    """The links among a group's own members are counted in the group, those cut between two groups by the
    messages: together, every link once, as counting each link's two ends would."""
    from imgrec.transforms import near_duplicates as nd  # pylint: disable=import-outside-toplevel
    from imgrec.transforms.near_duplicate_groups import Member, Node  # pylint: disable=import-outside-toplevel
    rng = random.Random(5)
    sources = [f'img{i:02d}' for i in range(24)]
    links = {frozenset(rng.sample(sources, 2)) for _ in range(60)}
    neighbours = collections.defaultdict(list)
    for a, b in map(sorted, links):
        neighbours[a].append((b, 3, 0.95))
        neighbours[b].append((a, 3, 0.95))
    group_of = {source: sources[sources.index(source) // 6 * 6] for source in sources}  # cut into 4 groups
    split = {source: rng.choice(('train', 'validation')) for source in sources}
    label = {source: f'class{rng.randrange(2)}' for source in sources}
    groups = collections.defaultdict(list)
    for source in sources:
        record = _record(source, 1)._replace(split=split[source], label_text=label[source])
        groups[group_of[source]].append(Member(record, Node(group_of[source], '', 0, tuple(sorted(neighbours[source])))))
    totals, listed = dict.fromkeys(nd._PAIR_STATS, 0), []
    messages = collections.defaultdict(list)
    for group in groups.items():
        stats, pairs = nd._pairs_within(group[1])
        totals = {key: totals[key] + stats[key] for key in totals}
        listed += pairs
        for source, heard in nd._pair_messages(group):
            messages[source].append(heard)
    for stat in (value for keyed in messages.items() for _, value in nd._pair_stats(keyed)):
        if stat.kind == nd._STATS:
            totals = {key: totals[key] + stat.value[key] for key in totals}
        else:
            listed += stat.value
    assert totals == {'pairs': len(links),
                      'pairs_across_splits': sum(split[a] != split[b] for a, b in map(sorted, links)),
                      'pairs_across_labels': sum(label[a] != label[b] for a, b in map(sorted, links))}
    assert sorted(listed) == sorted((a, label[a], split[a], b, label[b], split[b])
                                    for a, b in map(sorted, links) if label[a] != label[b])
    assert any(group_of[a] != group_of[b] for a, b in map(sorted, links))
    assert any(group_of[a] == group_of[b] for a, b in map(sorted, links))


def test_the_confirmation_decodes_each_picture_once_and_its_links_do_not_depend_on_how_many_it_keeps(monkeypatch):
    """Candidates at random among 40 images (copies of 10 looks): the same links whatever the pictures kept and
    the slices read; with room for them all, each picture decoded once, over two keys on one worker."""
    from imgrec.imaging import picture_check  # pylint: disable=import-outside-toplevel
    from imgrec.transforms import near_duplicate_candidates as candidates  # pylint: disable=import-outside-toplevel
    from imgrec.transforms import near_duplicate_confirm as confirm  # pylint: disable=import-outside-toplevel
    rng = random.Random(8)
    sources = [f'c{i:02d}' for i in range(40)]
    hashed = candidates.Hashed((_SPILL,))
    places = {source: candidates.Frame(0, *_frame(source, f'look{i % 10}')[1:]) for i, source in enumerate(sources)}
    pairs = {tuple(sorted(rng.sample(sources, 2))) for _ in range(150)}
    keys = [[candidates.Candidate(places[a], places[b], 3) for a, b in sorted(pairs) if hash_of(a) % 2 == key]
            for key in (0, 1)]
    decoded = collections.Counter()
    levels_from_jpeg = picture_check.levels_from_jpeg

    def counted(data):
        decoded[data] += 1
        return levels_from_jpeg(data)

    monkeypatch.setattr(picture_check, 'levels_from_jpeg', counted)

    def links(kept, at_once):
        monkeypatch.setattr(confirm, 'PICTURES_KEPT', kept)
        monkeypatch.setattr(confirm, 'PAIRS_AT_ONCE', at_once)
        decoded.clear()
        fn = confirm._ConfirmFn()
        fn.setup()
        found = sorted(link for key, given in enumerate(keys)
                       for link in fn.process((key, b''.join(map(candidates.packed_candidate, given))), hashed))
        fn.teardown()
        return found, sum(decoded.values())

    expected, decodes = links(1024, 256)
    assert expected == sorted((a, b, 3, 1.0) for a, b in pairs if sources.index(a) % 10 == sources.index(b) % 10)
    assert 0 < decodes <= len({frame for given in keys for pair in given for frame in pair[:2]})
    for kept, at_once in ((4, 2), (8, 4), (16, 1), (4, 16), (2, 64)):  # fewer kept than a slice's frames too
        assert links(kept, at_once)[0] == expected
    order = confirm.visiting_order([(0, 1), (2, 3), (1, 2), (0, 3)])
    assert sorted(order) == [0, 1, 2, 3]


def test_missing_pictures_are_left_to_the_check():
    """A candidate whose frame could not be read has no picture: the bound leaves it to the check."""
    from imgrec.imaging import picture_check  # pylint: disable=import-outside-toplevel
    from imgrec.transforms import near_duplicate_confirm as confirm  # pylint: disable=import-outside-toplevel
    picture = picture_check.from_image(Image.new('RGB', (64, 64), (90, 30, 200)))
    assert confirm._refused_by_bound([(None, picture), (picture, None)]) == set()
