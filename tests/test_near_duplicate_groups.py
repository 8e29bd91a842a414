"""The grouping rule of ``imgrec.transforms.near_duplicate_groups``: connected components of confirmed links,
whole, the same whatever the order; a component past ``MAX_GROUP`` cut at its weakest links, which each
image lists (the benchmark's in-memory grouping, ``benchmarks.near_duplicate_groups.group_in_memory``, runs
the module's own functions). Beam's ``FindGroups``, which reads the records' frames, is tested by the builds
(tests/test_near_duplicates_build.py, tests/test_near_duplicates_zoo.py)."""
import collections
import pickle
import random

from benchmarks.near_duplicate_groups import group_in_memory, synthetic
from imgrec.imaging import perceptual_hash as ph
from imgrec.transforms.near_duplicate_groups import IndexGroups, bounded_groups, group_name

CHAIN = ('chain/a.jpg', 'chain/b.jpg', 'chain/c.jpg', 'chain/d.jpg', 'chain/e.jpg')


def _flip(value, bits):
    for bit in bits:
        value ^= 1 << bit
    return value


def _groups(leader_of):
    members = collections.defaultdict(set)
    for source, leader in leader_of.items():
        members[leader].add(source)
    return members


def _corpus(count=300, seed=5):
    """(sources, hashes (ints: one hash an image, the whole image's), thumbnails (bytes), threshold): ``synthetic``
    hashes with 10% planted copies,
    plus a chain A-B-C-D-E whose neighbours only are within the threshold, and a cloud of 12 copies of one
    image, each within the threshold of some of the others but not of all, all with one picture's thumbnail."""
    sources, hashes, thumbnails, _ = synthetic(count, seed, planted_share=0.1)
    sources, hashes, thumbnails = list(sources), [int(h[0]) for h in hashes], [t.tobytes() for t in thumbnails]
    threshold = ph.MAX_THRESHOLD
    rng = random.Random(seed)
    step = threshold // 2 + 1  # two steps are over the threshold
    value, picture = rng.getrandbits(64), thumbnails[0]
    for i, source in enumerate(CHAIN):
        sources.append(source)
        hashes.append(_flip(value, range(i * step, (i + 1) * step)))
        thumbnails.append(picture)
        value = hashes[-1]
    base, pool = rng.getrandbits(64), rng.sample(range(ph.BITS), 3 * threshold)
    for i in range(12):  # each ``step`` bits from the pool flipped: no copy of the base itself, no hub
        sources.append(f'cloud/{i:02d}.jpg')
        hashes.append(_flip(base, rng.sample(pool, step)))
        thumbnails.append(thumbnails[1])
    return sources, hashes, thumbnails, threshold


def _chain_links(similarity=0.99):
    links = collections.defaultdict(list)
    for a, b in zip(CHAIN, CHAIN[1:]):
        links[a].append((b, 7, similarity))
        links[b].append((a, 7, similarity))
    return {source: tuple(sorted(neighbours)) for source, neighbours in links.items()}


def test_a_chain_of_confirmed_links_is_one_group():
    name_of, cut = bounded_groups(_chain_links())
    assert len(set(name_of.values())) == 1 and set(name_of) == set(CHAIN) and cut == {}


def test_a_component_past_the_bound_is_cut_at_its_weakest_link_and_says_which():
    links = _chain_links()
    weak = dict(links)
    weak['chain/b.jpg'] = tuple(sorted((o, d, 0.96 if o == 'chain/c.jpg' else s) for o, d, s in links['chain/b.jpg']))
    weak['chain/c.jpg'] = tuple(sorted((o, d, 0.96 if o == 'chain/b.jpg' else s) for o, d, s in links['chain/c.jpg']))
    name_of, cut = bounded_groups(weak, max_group=3)
    groups = _groups(name_of)
    assert sorted(map(len, groups.values())) == [2, 3]
    assert cut == {'chain/b.jpg': ('chain/c.jpg',), 'chain/c.jpg': ('chain/b.jpg',)}
    assert name_of['chain/a.jpg'] == name_of['chain/b.jpg'] != name_of['chain/c.jpg']


def test_bounded_groups_does_not_depend_on_the_order_of_its_input():
    rng = random.Random(3)
    names = [f'img/{i:03d}.jpg' for i in range(40)]
    links = collections.defaultdict(set)
    for _ in range(80):
        a, b = rng.sample(names, 2)
        similarity = round(rng.uniform(0.95, 1.0), 4)
        links[a].add((b, 3, similarity))
        links[b].add((a, 3, similarity))
    expected = bounded_groups({s: tuple(sorted(n)) for s, n in links.items()}, max_group=7)
    for _ in range(5):
        order = list(links)
        rng.shuffle(order)
        shuffled = {s: tuple(rng.sample(sorted(links[s]), len(links[s]))) for s in order}
        assert bounded_groups(shuffled, max_group=7) == expected
    assert max(map(len, _groups(expected[0]).values())) <= 7


def test_the_whole_rule_keeps_a_chain_of_copies_together():
    sources, hashes, thumbnails, threshold = _corpus()
    result = group_in_memory(sources, hashes, thumbnails, threshold)
    groups = _groups(result['leader_of'])
    chain = {result['leader_of'].get(source) for source in CHAIN}
    assert len(chain) == 1 and None not in chain  # the links join it: components, not stars
    cloud = {result['leader_of'].get(f'cloud/{i:02d}.jpg') for i in range(12)}
    assert len(cloud) == 1 and None not in cloud
    assert max(map(len, groups.values())) <= 12


def test_the_in_memory_grouping_does_not_depend_on_the_order_of_the_images():
    sources, hashes, thumbnails, threshold = _corpus()
    expected = group_in_memory(sources, hashes, thumbnails, threshold)['leader_of']
    order = list(range(len(sources)))
    random.Random(1).shuffle(order)
    found = group_in_memory([sources[i] for i in order], [hashes[i] for i in order],
                            [thumbnails[i] for i in order], threshold)['leader_of']
    assert found == expected


def test_the_group_index_names_each_linked_image_s_group_and_no_other_image_s_whatever_the_combine_s_order():
    rng = random.Random(3)
    group_of = {f'class{i % 7}/{i:05d}.jpg': f'class{i % 7}/{i // 50 * 50:05d}.jpg' for i in range(3000)}
    pairs = list(group_of.items())
    rng.shuffle(pairs)
    combine = IndexGroups()
    parts = []
    for start in range(0, len(pairs), 700):  # partial accumulators, pickled as between workers, merged in any order
        accumulator = combine.create_accumulator()
        for pair in pairs[start:start + 700]:
            accumulator = combine.add_input(accumulator, pair)
        parts.append(pickle.loads(pickle.dumps(accumulator)))
    rng.shuffle(parts)
    index = {None: pickle.loads(pickle.dumps(combine.extract_output(combine.merge_accumulators(parts))))}
    assert len(index[None]) == len(group_of)
    assert all(group_name(index, source) == group for source, group in group_of.items())
    assert group_name(index, 'class0/99999.jpg') is None and group_name(index, '') is None
    assert group_name({}, 'class0/00000.jpg') is None  # no image linked: the side input is empty
