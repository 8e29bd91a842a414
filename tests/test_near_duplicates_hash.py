"""The perceptual hash and the banding that finds near-duplicate pairs: plain functions (a DoFn called as one), no
pipeline."""
import collections
import io
import itertools
import random

import apache_beam as beam
import numpy as np
import pytest
from PIL import Image, ImageDraw

from imgrec.imaging import image_ops, perceptual_hash as ph, picture_check
from imgrec.imaging.record_options import RecordOptions
from imgrec.samples import one_style
from imgrec.samples.near_duplicates import TRANSFORMS, draw_photo, make_twin, write_corpus
from imgrec.samples import zoo_flat
from imgrec.samples.zoo_flat import draw_icon
from imgrec.transforms.elements import RecordRef
from imgrec.transforms import near_duplicate_candidates as candidates
from imgrec.transforms.near_duplicate_candidates import Frame, Hashed, band_keys, member_id, pairs_in_bucket, unpacked
from imgrec.transforms import near_duplicate_groups as groups
from imgrec.transforms.near_duplicate_groups import join_labels
from imgrec.transforms.splits import published_group_split

THRESHOLD = ph.MAX_THRESHOLD
EDGES = ph.band_edges(ph.bands_for(THRESHOLD))


def _photo(seed, size=(240, 180)):
    return draw_photo(*size, random.Random(seed))


def _decoded(image, fmt='JPEG', quality=90, target=(32, 32)):
    """``image`` saved and decoded as the build decodes it (draft and all)."""
    out = io.BytesIO()
    image.save(out, fmt, **({'quality': quality} if fmt == 'JPEG' else {}))
    return image_ops.decode(out.getvalue(), target)[0]


def test_the_hash_is_64_bits_and_deterministic():
    image = _photo(1)
    value = ph.perceptual_hash(image)
    assert 0 <= value < 2 ** 64
    assert value == ph.perceptual_hash(image.copy())
    assert ph.from_hex(ph.to_hex(value)) == (value,) and len(ph.to_hex(value)) == 16
    assert ph.to_hex(1) == '0000000000000001'
    hashes = ph.perceptual_hashes(image)
    assert len(hashes) == ph.HASHES and hashes[0] == value and ph.from_hex(ph.to_hex(hashes)) == hashes


def test_the_centre_hash_leaves_out_the_borders():
    """A bar across the bottom fifth changes the whole image's hash, not its centre's: the centre hash
    sees CENTRE_MARGIN less of each side."""
    image = _decoded(_photo(2), target=(180, 240))
    barred = image.copy()
    barred.paste((20, 20, 20), (0, round(image.height * 0.86), image.width, image.height))
    whole, centre = ph.perceptual_hashes(image)
    barred_whole, barred_centre = ph.perceptual_hashes(barred)
    assert barred_centre == centre and ph.distance(whole, barred_whole) > 0


def _wave(row_frequency, column_frequency, sign=1):
    """A 32x32 grey picture of one DCT wave: only that coefficient is far from 0."""
    y, x = np.mgrid[0:32, 0:32]
    wave = (np.cos(np.pi * (2 * y + 1) * row_frequency / 64) * np.cos(np.pi * (2 * x + 1) * column_frequency / 64))
    return Image.fromarray((128 + sign * 100 * wave).round().astype(np.uint8), 'L')


def test_each_bit_is_the_sign_of_one_low_frequency():
    """Frequency (1, 1) is the first bit, (1, 2) the second, (2, 1) the ninth; a wave's negative clears it."""
    for (row, column), bit in (((1, 1), 63), ((1, 2), 62), ((2, 1), 55), ((8, 8), 0)):
        assert ph.perceptual_hash(_wave(row, column)) >> bit & 1, (row, column)
        assert not ph.perceptual_hash(_wave(row, column, -1)) >> bit & 1, (row, column)


def test_a_gradients_re_encoded_copy_keeps_its_hash():
    """A smooth gradient has few waves stronger than re-compression noise: their bits are its signs, the rest
    its colour layout's projections, which a quality-30 copy keeps (the signs alone: about half within)."""
    within = 0
    for label in zoo_flat.GRADIENTS:
        for index in range(6):
            gradient = zoo_flat.draw_gradient(label, index, 0, 96)
            within += ph.distance(ph.perceptual_hash(_decoded(gradient, quality=95)),
                                  ph.perceptual_hash(_decoded(gradient, quality=30))) <= THRESHOLD
    assert within >= 0.9 * 6 * len(zoo_flat.GRADIENTS)


def test_a_grey_image_hashes_as_its_colour_copy():
    """A grey image has no chroma to project: its hashes are those of the same pixels in RGB."""
    grey = _decoded(_photo(3)).convert('L')
    assert ph.perceptual_hashes(grey) == ph.perceptual_hashes(grey.convert('RGB'))


def test_a_flat_grey_picture_hashes_to_0_in_any_mode_and_brightness():
    """A flat grey picture has no waves and no chroma: its bits are 0, not the signs of rounding noise (which
    differ from one level, mode or machine to another)."""
    for level in (1, 100, 128, 200, 255):
        assert ph.perceptual_hashes(Image.new('L', (300, 200), level)) == (0, 0)
        assert ph.perceptual_hashes(Image.new('RGB', (300, 200), (level,) * 3)) == (0, 0)


def test_flat_pictures_hash_by_their_colour():
    """A picture of one colour has no waves: its bits are its mean chroma's, so another colour is far and the
    same colour brightened is near."""
    def flat(colour):
        return ph.perceptual_hash(_decoded(Image.new('RGB', (64, 64), colour)))

    teal = flat((40, 150, 140))
    assert ph.distance(teal, flat((48, 180, 168))) <= 4  # 20% brighter
    assert ph.distance(teal, flat((170, 60, 90))) > THRESHOLD


def test_scaling_or_shifting_every_pixel_keeps_the_hash():
    image = np.asarray(_decoded(_photo(4)).convert('L'), dtype=np.float64)
    value = ph.perceptual_hash(Image.fromarray(image.astype(np.uint8), 'L'))
    for changed in (image * 0.8, image * 0.8 + 20):
        assert ph.distance(value, ph.perceptual_hash(Image.fromarray(changed.round().astype(np.uint8), 'L'))) <= 2


@pytest.mark.parametrize('kind', ['jpeg', 'scale', 'crop', 'brightness', 'caption', 'png'])
def test_each_planted_copy_stays_within_the_threshold(kind):
    """The transforms the planted corpus uses, on photos drawn for this test: most copies of each kind
    stay within the threshold (the corpus-wide rates are the build tests' and the benchmark's)."""
    within = 0
    for seed in range(10):
        original = _photo(seed)
        twin, extension, quality = make_twin(original, kind, random.Random(seed))
        distance = ph.distance(ph.perceptual_hash(_decoded(original)),
                               ph.perceptual_hash(_decoded(twin, 'PNG' if extension == 'png' else 'JPEG',
                                                           quality or 90)))
        within += distance <= THRESHOLD
    assert within >= 8, kind


def test_unrelated_photos_are_far_apart():
    hashes = [ph.perceptual_hash(_decoded(_photo(seed))) for seed in range(60)]
    distances = [ph.distance(a, b) for a, b in itertools.combinations(hashes, 2)]
    # About half their bits differ; the few within the threshold are candidates the pixel check refuses.
    assert sum(d <= THRESHOLD for d in distances) <= 0.01 * len(distances)
    assert 26 <= sum(distances) / len(distances) <= 38


def test_bands_cover_the_bits_and_the_threshold():
    edges = EDGES
    assert len(edges) == THRESHOLD + 1
    assert edges[0][0] == 0 and edges[-1][1] == ph.BITS
    assert all(a[1] == b[0] for a, b in itertools.pairwise(edges))
    assert ph.band_edges(3, 8) == ((0, 3), (3, 6), (6, 8))
    assert ph.band_values(0x0123456789abcdef, ph.band_edges(8)) == (0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef)
    value = random.Random(2).getrandbits(64)
    rebuilt = 0
    for (start, stop), part in zip(edges, ph.band_values(value, edges)):
        rebuilt = rebuilt << (stop - start) | part
    assert rebuilt == value


def _shared_bands(a, b):
    return [band for band, (x, y) in enumerate(zip(ph.band_values(a, EDGES), ph.band_values(b, EDGES))) if x == y]


def test_pigeonhole_every_pair_within_the_threshold_shares_a_band():
    rng = random.Random(5)
    for _ in range(2000):
        a = rng.getrandbits(64)
        b = a
        for bit in rng.sample(range(64), rng.randint(0, THRESHOLD)):
            b ^= 1 << bit
        # Both in the bucket of each band they share; the build's band test keeps the pair from the first only.
        shared = _shared_bands(a, b)
        kept = [band for band in shared if list(pairs_in_bucket(band, [(a, 'a'), (b, 'b')], THRESHOLD))]
        assert shared and kept == shared[:1]
    # ... and a pair one bit further may share none: the bound is tight.
    spread = sum(1 << (63 - start) for start, _ in EDGES)
    assert ph.distance(0, spread) == THRESHOLD + 1 and _shared_bands(0, spread) == []


def test_the_threshold_falls_as_chance_pairs_grow_with_the_collection():
    assert ph.threshold_for(2) == ph.threshold_for(2_000) == ph.MAX_THRESHOLD == 20
    assert (ph.threshold_for(2_400), ph.threshold_for(10_000), ph.threshold_for(100_000),
            ph.threshold_for(1_281_167)) == (19, 16, 13, 10)
    for images in (2, 700, 10_000, 100_000, 1_281_167, 10 ** 8):
        threshold, pairs = ph.threshold_for(images), images * (images - 1) / 2
        within = lambda t: ((images - 1) * ph.chance(t) <= ph.CHANCE_PAIRS_PER_IMAGE  # noqa: E731
                            or pairs * ph.chance(t) <= ph.CHANCE_CHECKS)
        assert within(threshold)
        assert threshold == ph.MAX_THRESHOLD or not within(threshold + 1)
    assert ph.chance(64) == 1 and ph.chance(0) == 2 ** -64


def test_pairs_within_matches_all_pairs_in_any_block_size():
    rng = random.Random(9)
    base = [rng.getrandbits(64) for _ in range(40)]
    hashes = base + [value ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for value in base[:15]]
    expected = sorted((i, j, ph.distance(a, b)) for (i, a), (j, b) in itertools.combinations(enumerate(hashes), 2)
                      if ph.distance(a, b) <= 5)
    assert len(expected) >= 15
    for cells in (1, 7, 100, 1 << 20):
        assert sorted(ph.pairs_within(hashes, 5, block_cells=cells)) == expected


def test_a_pair_sharing_several_bands_is_found_once():
    a, b = 0x0123456789abcdef, 0x0123456789abcdef ^ 0b101  # differ in the last band only
    members = [(a, 'x.jpg'), (b, 'y.jpg')]
    found = [(band, link) for band in range(len(EDGES)) for link in pairs_in_bucket(band, members, THRESHOLD)]
    assert found == [(0, ('x.jpg', 'y.jpg', 2))]


def test_a_band_member_carries_its_hashes_name_number_and_frame():
    """What a bucket gives back of a record (``band_keys``, ``unpacked``): its hashes, its member id and its
    frame (its file's number in the survey's table, an offset past 4 GiB, a length), one member a band, none
    without a frame to confirm it by."""
    hashes = (0x8000_0000_0000_0001, 0x7FFF_FFFF_FFFF_FFFE)
    record = RecordRef('a/1.jpg', 'a/1.jpg', 'a', 'train', 0, 'sha', 1, None, None, (), 'spill/b', 5 << 32, 70_000,
                       perceptual_hash=ph.to_hex(hashes))
    hashed = Hashed(1, ('spill/a', 'spill/b', 'spill/c'))
    keyed = list(band_keys(record, 12, hashed))
    assert len(keyed) == ph.HASHES * ph.bands_for(12)
    assert {unpacked(member)[0] for _, member in keyed} == {
        (tuple(value - (1 << 64) if value >> 63 else value for value in hashes),
         (member_id('a/1.jpg'), Frame(1, 5 << 32, 70_000)))}
    assert not list(band_keys(record._replace(payload_file=None), 12, hashed))


def test_a_candidate_packed_for_its_confirmation_comes_back_whole_and_in_order():
    """A file's candidates travel as one byte string (``packed_candidate``, concatenated in any order) and come
    back as the Candidates they were, sorted: frame files' numbers, offsets past 4 GiB, lengths, distances."""
    given = [candidates.Candidate(Frame(3, 5 << 32, 70_000), Frame(0, 12, 4_000), 7),
             candidates.Candidate(Frame(0, 9, 1), Frame(2**31 - 1, (1 << 40) + 3, 2**32 - 1), 0),
             candidates.Candidate(Frame(0, 9, 1), Frame(1, 0, 2), 20)]
    combine = candidates.Concatenated()
    accumulators = [combine.add_input(combine.create_accumulator(), candidates.packed_candidate(candidate))
                    for candidate in reversed(given)]
    packed = combine.extract_output(combine.merge_accumulators(accumulators))
    assert len(packed) == len(given) * candidates.CANDIDATE.size == 120
    assert candidates.unpacked_candidates(packed) == sorted(given)


def test_copies_of_a_picture_go_through_every_band_but_the_stars_once_and_find_the_same_candidates(monkeypatch):
    """Five pictures saved four times each (identical hashes, distinct frames) and ten near images: every band
    bucket but the first of the first hash keeps one copy of each picture (``first_of_each_picture``, also as
    members are gathered), and compares the same pairs as it would with every copy."""
    rng = random.Random(5)
    pictures = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(5)]
    near = [tuple(value ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for value in rng.choice(pictures))
            for _ in range(10)]
    hashed = Hashed(30, ('spill/a', 'spill/b'))
    records = [RecordRef(f'{i:02d}.jpg', '', 'a', 'train', 0, 'sha', 1, None, None, (), hashed.files[i % 2],
                         1000 * i, 900, perceptual_hash=ph.to_hex(values))
               for i, values in enumerate([picture for picture in pictures for _ in range(4)] + near)]
    buckets = collections.defaultdict(bytearray)
    for record in records:
        for key, member in band_keys(record, THRESHOLD, hashed):
            buckets[key] += member
    monkeypatch.setattr(candidates._MembersFn, 'COMPACT_FROM', 2)
    size, shrunk = candidates.MEMBER.itemsize * candidates.MEMBER_FIELDS, 0
    for (index, band, _), members in buckets.items():
        combine = candidates._MembersFn(copies_once=True)
        gathered = combine.create_accumulator()
        for start in range(0, len(members), size):
            gathered = combine.add_input(gathered, bytes(members[start:start + size]))
        once = combine.extract_output(gathered)
        assert once == candidates.first_of_each_picture(members)
        shrunk += len(once) < len(members)
        if (index, band) != (0, 0):
            assert sorted(pairs_in_bucket(band, unpacked(once), THRESHOLD, index)) == \
                sorted(pairs_in_bucket(band, unpacked(members), THRESHOLD, index))
    assert shrunk


def test_identical_hashes_are_linked_to_the_first_of_them():
    """Members whose hashes are all identical (copies of one picture) are linked in a star, not pair by pair."""
    members = [(7, 'c.jpg'), (7, 'a.jpg'), (7, 'b.jpg'), (7 ^ 1, 'd.jpg')]
    links = sorted(pairs_in_bucket(0, members, THRESHOLD))
    assert links == [('a.jpg', 'b.jpg', 0), ('a.jpg', 'c.jpg', 0), ('a.jpg', 'd.jpg', 1)]
    assert list(pairs_in_bucket(1, members, THRESHOLD)) == []  # found again in band 1: kept from band 0 only


def test_images_alike_in_one_hash_only_are_compared_pair_by_pair():
    """Smooth pictures' centres often hash alike while the pictures differ: a star from the first of them
    would never propose the pair of the other two (a copy and its original)."""
    far = (1 << THRESHOLD + 1) - 1
    members = [((0, 5), 'a.jpg'), ((far, 5), 'b.jpg'), ((far << THRESHOLD + 1, 5), 'c.jpg')]
    assert sorted(pairs_in_bucket(0, members, THRESHOLD, 1)) == [
        ('a.jpg', 'b.jpg', 0), ('a.jpg', 'c.jpg', 0), ('b.jpg', 'c.jpg', 0)]


def test_a_pair_is_found_in_the_first_hash_that_has_it_within_the_threshold():
    """Members carry (whole, centre): a pair within the threshold on both is found in the whole hash's
    bucket only; a pair within it on the centre alone, in the centre's, with the smaller distance."""
    far = (1 << THRESHOLD + 1) - 1  # THRESHOLD + 1 bits apart
    both = [((0, 0), 'a.jpg'), ((1, 3), 'b.jpg')]
    centre_only = [((0, 0), 'a.jpg'), ((far, 1), 'c.jpg')]
    assert list(pairs_in_bucket(0, both, THRESHOLD, 0)) == [('a.jpg', 'b.jpg', 1)]
    assert list(pairs_in_bucket(0, both, THRESHOLD, 1)) == []
    assert list(pairs_in_bucket(0, centre_only, THRESHOLD, 1)) == [('a.jpg', 'c.jpg', 1)]
    assert all(list(pairs_in_bucket(band, centre_only, THRESHOLD, 0)) == [] for band in range(len(EDGES)))


def test_copies_linked_in_a_star_start_with_one_label():
    """The band buckets link copies of one picture to the copy with the smallest member id; labels order by it
    (``label_of``), so every copy starts with the centre's label, settled before any round, whatever the names'
    own order."""
    sources = [f'copy-{i}.jpg' for i in range(12)]
    centre = min(sources, key=member_id)
    assert centre != min(sources)  # the names' order would have started the leaves apart
    links = {source: [(centre, 0, 1.0)] for source in sources if source != centre}
    links[centre] = [(source, 0, 1.0) for source in links]
    labels = {node: groups._adjacent((node, neighbours))[1][1] for node, neighbours in links.items()}
    assert set(labels.values()) == {groups.label_of(centre)}


def test_join_labels_gives_each_label_the_smallest_it_is_joined_to():
    assert join_labels([]) == {}
    assert join_labels([('c', 'd'), ('a', 'c'), ('x', 'y'), ('b', 'd')]) == {'b': 'a', 'c': 'a', 'd': 'a', 'y': 'x'}


def test_a_round_tells_each_unsettled_edge_once():
    """A chain (video frames: each linked to the next) is the most unsettled shape: every edge whose ends' labels
    differ is told once, by its end with the smaller label, so one worker joins half as many pairs; the joined
    labels are what both ends telling it gave."""
    rng = random.Random(3)
    chain = [f'frame-{i:03d}.jpg' for i in range(60)]
    rng.shuffle(chain)
    links = collections.defaultdict(list)
    for a, b in zip(chain, chain[1:]):
        links[a].append((b, 1, 0.99))
        links[b].append((a, 1, 0.99))
    state = dict(map(groups._adjacent, links.items()))
    heard = collections.defaultdict(list)
    for node, message in itertools.chain.from_iterable(map(groups._send, state.items())):
        heard[node].append(message)
    told = [output.value for node in heard for output in groups._PropagateFn().process((node, heard[node]))
            if isinstance(output, beam.pvalue.TaggedOutput)]
    disagreeing = {(min(state[a][1], state[b][1]), max(state[a][1], state[b][1]))
                   for a, b in zip(chain, chain[1:]) if state[a][1] != state[b][1]}
    assert disagreeing and sorted(told) == sorted(disagreeing)  # each once
    relabel = join_labels(told)
    assert len({relabel.get(label, label) for _, label, _ in state.values()}) == 1  # one component


def _record(source, split, published=None):
    return RecordRef(source, source, 'cat', split, 0, 'sha', 1, None, None, (), 'spill', 0, 1,
                     published_split=published)


def test_a_published_group_keeps_the_split_most_of_it_was_in():
    names = ('train', 'validation')
    records = [_record('a.jpg', 'train', 'validation'), _record('b.jpg', 'train', 'validation'),
               _record('c.jpg', 'validation', 'train'), _record('new.jpg', 'train')]
    assert published_group_split(records, names) == 'validation'
    # A group with no published image, or only splits that no longer exist, is dealt afresh.
    assert published_group_split([_record('new.jpg', 'train')], names) is None
    assert published_group_split([_record('a.jpg', 'train', 'test')], names) is None


# The second check (``same_picture``) on generated corpora, decoded as the build decodes them.

OPTIONS = RecordOptions((192, 192))


def _decoded_corpus(root, names):
    """(hashes, pictures) of ``names`` under ``root``, as the build's decoding step gives the hashes and the
    check reads the written JPEGs."""
    hashes, pictures = [], []
    for name in names:
        jpeg, notes = image_ops.decode_resize_encode((root / name).read_bytes(), OPTIONS, with_hash=True)
        hashes.append(ph.from_hex(notes['perceptual_hash']))
        pictures.append(picture_check.from_jpeg(jpeg))
    return hashes, pictures


def _confirmed_pairs(hashes, pictures, threshold):
    """(i, j, distance) of every pair within ``threshold`` whose pictures agree: both checks, by brute force."""
    return [(i, j, d) for i, j, d in _candidates(hashes, threshold)
            if picture_check.same_picture(pictures[i], pictures[j])]


def _candidates(hashes, threshold):
    """(i, j, distance) of every pair within ``threshold`` on either hash, by brute force."""
    within = {(i, j) for index in range(ph.HASHES)
              for i, j, _ in ph.pairs_within([values[index] for values in hashes], threshold)}
    return [(i, j, ph.nearest_distance(hashes[i], hashes[j])) for i, j in sorted(within)]


@pytest.fixture(scope='module')
def planted(tmp_path_factory):
    """10 planted near-duplicates of each of the 6 kinds among 80 photos: (pairs, index, hashes, thumbnails)."""
    root = tmp_path_factory.mktemp('planted')
    pairs = write_corpus(str(root), 16, 10 * len(TRANSFORMS), seed=24)
    names = sorted(str(path.relative_to(root)) for path in root.rglob('*.*'))
    return pairs, {name: i for i, name in enumerate(names)}, *_decoded_corpus(root, names)


@pytest.fixture(scope='module', params=['one-style', 'mixed'])
def distinct(request, tmp_path_factory):
    """300 distinct images, of one style or of three: (hashes, thumbnails)."""
    root = tmp_path_factory.mktemp(request.param)
    names = one_style.write_corpus(str(root), 300, seed=24, mixed=request.param == 'mixed', min_side=240,
                                   max_side=480)
    return request.param, *_decoded_corpus(root, names)


def _with_candidates(pairs):
    return {image for i, j, _ in pairs for image in (i, j)}


def test_planted_pairs_of_every_kind_are_found_by_both_checks(planted):
    pairs, index, hashes, thumbnails = planted
    threshold = ph.threshold_for(len(hashes))
    found, confirmed = collections.Counter(), 0
    for pair in pairs:
        a, b = index[pair['original']], index[pair['twin']]
        same = picture_check.same_picture(thumbnails[a], thumbnails[b])
        confirmed += same
        found[pair['transform']] += same and ph.nearest_distance(hashes[a], hashes[b]) <= threshold
    assert sum(found.values()) >= 0.95 * len(pairs), found
    assert all(found[kind] >= 8 for kind in TRANSFORMS), found  # no kind of copy is lost
    assert confirmed >= len(pairs) - 1  # the check refuses at most one copy the hash may have found


def test_planted_corpus_strangers_are_not_confirmed(planted):
    pairs, index, hashes, thumbnails = planted
    twins = {frozenset((index[pair['original']], index[pair['twin']])) for pair in pairs}
    strangers = [(i, j, d) for i, j, d in _confirmed_pairs(hashes, thumbnails, ph.threshold_for(len(hashes)))
                 if frozenset((i, j)) not in twins]
    assert len(_with_candidates(strangers)) < 0.01 * len(hashes)


def test_distinct_images_almost_never_have_a_confirmed_candidate(distinct):
    """The hash alone gives many of these images a candidate (one style shares a layout); the check
    leaves fewer than 1% of them with one."""
    style, hashes, thumbnails = distinct
    threshold = ph.threshold_for(len(hashes))
    candidates = _candidates(hashes, threshold)
    confirmed = _confirmed_pairs(hashes, thumbnails, threshold)
    if style == 'one-style':
        assert len(_with_candidates(candidates)) >= 0.2 * len(hashes)  # what the check is there for
    assert len(_with_candidates(confirmed)) < 0.01 * len(hashes), confirmed


def test_the_check_sees_colour_the_hash_cannot():
    """The same grey picture in other colours hashes alike but is not the same picture; a brightened or
    captioned copy is."""
    photo = _photo(7, (320, 240))
    luma, blue, red = photo.convert('YCbCr').split()
    recoloured = Image.merge('YCbCr', (luma, red, blue)).convert('RGB')  # chroma swapped, light unchanged
    assert ph.distance(ph.perceptual_hash(photo), ph.perceptual_hash(recoloured)) <= 2
    picture = picture_check.from_image(photo)
    assert not picture_check.same_picture(picture, picture_check.from_image(recoloured))
    for kind in ('brightness', 'caption', 'crop'):
        twin, _, _ = make_twin(photo, kind, random.Random(3))
        assert picture_check.same_picture(picture, picture_check.from_image(twin)), kind


def _written(image):
    """``image`` saved as the build writes it (JPEG, 64 pixels), as a Picture."""
    out = io.BytesIO()
    image.resize((64, 64), Image.Resampling.LANCZOS).save(out, 'JPEG', quality=95)
    return picture_check.from_jpeg(out.getvalue())


def test_a_plain_picture_is_not_a_fine_pattern_of_its_colour():
    """Stripes two pixels wide at the check's size have the colour cells of a plain picture of their mean
    colour; their spread tells them apart. The plain picture's brightened and captioned copies still match."""
    plain = Image.new('RGB', (64, 64), (120, 70, 140))
    stripes = np.zeros((64, 64, 3), dtype=np.uint8) + np.array([120, 70, 140], dtype=np.uint8)
    stripes[(np.arange(64) // 2 % 2 == 0)] += 30
    stripes[(np.arange(64) // 2 % 2 == 1)] -= 30
    barred = plain.copy()
    ImageDraw.Draw(barred).rectangle((0, 57, 63, 63), fill=(20, 20, 20))  # a caption bar
    picture = _written(plain)
    assert picture.flat and not _written(Image.fromarray(stripes)).flat
    assert not picture_check.same_picture(picture, _written(Image.fromarray(stripes)))
    assert picture_check.same_picture(picture, _written(Image.new('RGB', (64, 64), (138, 80, 161))))
    assert picture_check.same_picture(picture, _written(barred))


def test_the_correlation_bound_is_never_under_the_checks_correlation_and_refuses_only_what_the_check_refuses():
    """Photos and their planted copies (every edit) and strangers, at two sizes: the slice's bound is at least the
    check's own correlation, so a candidate it refuses is one ``judge`` refuses; it refuses most strangers."""
    rng = random.Random(5)
    pictures = []
    for index in range(24):
        photo = draw_photo(rng.randint(120, 260), rng.randint(120, 260), rng)
        kind = TRANSFORMS[index % len(TRANSFORMS)] if index % 2 else 'caption'
        twin, _, quality = make_twin(photo, kind, rng)
        for image, at in ((photo, 90), (twin, quality or 90)):
            data = io.BytesIO()
            image.convert('RGB').resize((64, 64) if index % 3 else (224, 224)).save(data, 'JPEG', quality=at)
            pictures.append(picture_check.from_jpeg(data.getvalue()))
    pairs = [(a, b) for i, a in enumerate(pictures) for b in pictures[i + 1:] if not a.flat and not b.flat]
    bounds = picture_check.correlation_bounds(pairs)
    exact = [picture_check.compare(a, b)[0] for a, b in pairs]
    assert all(bound >= correlation - 1e-4 for bound, correlation in zip(bounds, exact))
    refused = picture_check.surely_refused(pairs)
    assert all(not picture_check.judge(*pair)[0] for pair, surely in zip(pairs, refused) if surely)
    assert refused.sum() > len(pairs) // 2
    assert not picture_check.surely_refused([(pictures[0], pictures[0])]).any()


def test_the_correlation_bound_leaves_plain_pictures_with_a_bar_to_the_check():
    """Two plain pictures with a bar in the same rows: once the bar's strip is left out, what is left is plain and
    either correlation rounding noise, so no bound refuses them."""
    pictures = []
    for level in (90, 160):
        image = np.full((64, 64, 3), level, dtype=np.uint8)
        image[28:36] = 255 - level
        pictures.append(picture_check.from_image(Image.fromarray(image)))
    assert not any(picture.flat for picture in pictures)
    assert picture_check.correlation_bounds([tuple(pictures)]) == [np.inf]


def _icon_picture(kind, quality=95):
    """A dark icon of 9 pixels on a plain ground (64 pixels a side), saved at ``quality`` and written again as
    the build writes it, as a Picture."""
    image = Image.new('RGB', (128, 128), (200, 90, 120))
    draw_icon(ImageDraw.Draw(image), kind, (40, 90), 18, (30, 40, 60), 0.2)
    image = image.resize((64, 64), Image.Resampling.LANCZOS)
    for step_quality in (quality, 95):
        out = io.BytesIO()
        image.save(out, 'JPEG', quality=step_quality)
        image = Image.open(io.BytesIO(out.getvalue())).convert('RGB')
    return picture_check.from_jpeg(out.getvalue())


@pytest.mark.parametrize('kind', ['star', 'bolt', 'heart', 'arrow'])
def test_a_small_icon_is_judged_against_its_range_of_levels(kind):
    """A small icon stands many standard deviations off its plain ground, so a re-compression's ringing at its
    edges looks large block by block in standardised units (the star's and the bolt's copies exceed
    MAX_LOCAL): measured against the pair's range of levels, the copy is found; another icon in the same
    place is still refused."""
    picture = _icon_picture(kind)
    assert not picture.flat
    assert picture_check.same_picture(picture, _icon_picture(kind, quality=30))
    for other in ('heart', 'star', 'bolt', 'arrow', 'plus', 'check'):
        if other != kind:
            assert not picture_check.same_picture(picture, _icon_picture(other)), other


def test_the_picture_check_is_symmetric_and_perfect_on_itself():
    a, b = picture_check.from_image(_photo(1)), picture_check.from_image(_photo(2))
    assert picture_check.similarity(a, a) == 1.0 and picture_check.same_picture(a, a)
    assert picture_check.compare(a, b)[0] == pytest.approx(picture_check.compare(b, a)[0], abs=1e-6)
    assert not picture_check.same_picture(a, b)


def test_the_distinct_corpora_are_the_same_however_many_processes_draw_them(tmp_path):
    written = []
    for processes in (1, 2):
        root = tmp_path / str(processes)
        names = one_style.write_corpus(str(root), 6, seed=5, mixed=True, min_side=64, max_side=96,
                                       processes=processes)
        written.append([(name, (root / name).read_bytes()) for name in names])
    assert written[0] == written[1]
    assert len({data for _, data in written[0]}) == 6


def test_band_buckets_find_every_pair_within_the_threshold_once():
    rng = random.Random(3)
    for threshold in (4, 12, THRESHOLD):
        edges = ph.band_edges(ph.bands_for(threshold))
        base = [rng.getrandbits(64) for _ in range(60)]
        hashes = base + [value ^ sum(1 << bit for bit in rng.sample(range(64), rng.randint(0, threshold)))
                         for value in base[:30]]
        sources = [f'{i:03d}.jpg' for i in range(len(hashes))]
        buckets = collections.defaultdict(list)
        for value, source in zip(hashes, sources):
            for band, band_value in enumerate(ph.band_values(value, edges)):
                buckets[band, band_value].append((value, source))
        found = [pair for (band, _), members in buckets.items() for pair in pairs_in_bucket(band, members, threshold)]
        expected = [(sources[i], sources[j], distance) for i, j, distance in ph.pairs_within(hashes, threshold)]
        assert len(found) == len(set(found)) and sorted(found) == sorted(expected)
