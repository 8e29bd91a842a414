"""The perceptual hash and each image's nearest by it, the near-duplicate candidates: plain functions, no pipeline."""
import collections
import io
import itertools
import random

import apache_beam as beam
import numpy as np
import pytest
from PIL import Image, ImageDraw

from imgrec.imaging import hash_neighbours, image_ops, perceptual_hash as ph, picture_check
from imgrec.imaging.record_options import RecordOptions
from imgrec.samples import one_style
from imgrec.samples.near_duplicates import TRANSFORMS, draw_photo, make_twin, write_corpus
from imgrec.samples import zoo_flat
from imgrec.samples.zoo_flat import draw_icon
from imgrec.transforms.elements import RecordRef
from imgrec.transforms import near_duplicate_candidates as candidates
from imgrec.transforms.near_duplicate_candidates import Frame, Hashed, member_id, unpacked
from imgrec.transforms import near_duplicate_groups as groups
from imgrec.transforms.near_duplicate_groups import join_labels
from imgrec.transforms.splits import published_group_split

THRESHOLD = ph.MAX_THRESHOLD


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


def _brute_nearest(hashes, threshold, k):
    """Each image's k nearest within the threshold, ties to the smaller position, pair by pair in Python."""
    found = set()
    for i, a in enumerate(hashes):
        near = sorted((ph.nearest_distance(a, b), j) for j, b in enumerate(hashes) if j != i)
        for distance, j in [item for item in near if item[0] <= threshold][:k]:
            found.add((min(i, j), max(i, j), distance))
    return sorted(found)


@pytest.mark.parametrize('k', [1, 3, 50])
def test_each_image_proposes_its_k_nearest_within_the_threshold(k, monkeypatch):
    """``nearest_pairs`` against every pair compared in Python: clusters of near hashes (ties at every distance),
    any block size, both hashes (a pair near on the centre alone is near)."""
    rng = random.Random(k)
    centres = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(6)]
    hashes = [tuple(value ^ rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64) for value in
                    rng.choice(centres)) for _ in range(90)]
    hashes += [(rng.getrandbits(64), hashes[0][1] ^ 1)]  # near hashes[0] by its centre only
    expected = _brute_nearest(hashes, THRESHOLD, k)
    array = np.array(hashes, dtype=np.uint64)
    for rows in (1, 7, 256):
        monkeypatch.setattr(hash_neighbours, 'BLOCK_ROWS', rows)
        assert [tuple(pair) for pair in hash_neighbours.nearest_pairs(array, THRESHOLD, k).tolist()] == expected
    assert (0, len(hashes) - 1, 1) in expected


def test_the_candidates_an_image_stay_bounded_however_alike_a_collection_is():
    """A collection of one kind: every pair within the threshold. The pairs proposed grow with the images, not
    their square; copies of one picture (distance 0) propose each other first."""
    rng = random.Random(3)
    base = rng.getrandbits(64)
    hashes = [(base ^ rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64),) * 2
              for _ in range(600)]
    hashes += [hashes[7]] * 3
    within = sum(ph.nearest_distance(a, b) <= THRESHOLD for a, b in itertools.combinations(hashes, 2))
    pairs = hash_neighbours.nearest_pairs(np.array(hashes, dtype=np.uint64), THRESHOLD, 3)
    assert within > 100 * len(hashes) and len(pairs) <= 3 * len(hashes)
    proposed = collections.Counter(pairs[:, :2].ravel().tolist())
    assert min(proposed[i] for i in range(len(hashes))) >= 1  # every image has its nearest
    copies = {7, 600, 601, 602}
    assert {(i, j) for i, j, distance in pairs.tolist() if distance == 0} >= {
        (i, j) for i, j in itertools.combinations(sorted(copies), 2) if j != 602 or i != 7}


def test_a_task_proposes_for_its_own_rows_the_same_as_the_whole():
    """The rows are cut into tasks (``NearestHashes``): their proposals together are the whole's."""
    rng = random.Random(8)
    array = np.array([(rng.getrandbits(64) & rng.getrandbits(64),) * 2 for _ in range(300)], dtype=np.uint64)
    whole = hash_neighbours.nearest_of(array, THRESHOLD, 3)
    parts = np.concatenate([hash_neighbours.nearest_of(array, THRESHOLD, 3, start, start + 70)
                            for start in range(0, 300, 70)])
    assert parts.tolist() == whole.tolist()


def test_a_member_carries_its_hashes_name_number_and_frame():
    """What a task reads of a record (``packed_member``, ``unpacked``): its hashes, its member id and its frame
    (its file's number in the survey's table, an offset past 4 GiB, a length); none without a frame to confirm it
    by. Members sort by member id, whatever order they came in."""
    hashes = (0x8000_0000_0000_0001, 0x7FFF_FFFF_FFFF_FFFE)
    record = RecordRef('a/1.jpg', 'a/1.jpg', 'a', 'train', 0, 'sha', 1, None, None, (), 'spill/b', 5 << 32, 70_000,
                       perceptual_hash=ph.to_hex(hashes))
    hashed = Hashed(('spill/a', 'spill/b', 'spill/c'))
    member = candidates.packed_member(record, hashed)
    assert unpacked(member) == [(tuple(value - (1 << 64) if value >> 63 else value for value in hashes),
                                 (member_id('a/1.jpg'), Frame(1, 5 << 32, 70_000)))]
    assert candidates.packed_member(record._replace(payload_file=None), hashed) is None
    others = [candidates.packed_member(record._replace(source=f'{i}.jpg'), hashed) for i in range(5)]
    ordered = unpacked(candidates.in_member_order(b''.join(reversed(others)) + member))
    assert [number for _, (number, _) in ordered] == sorted(number for _, (number, _) in ordered)


def test_a_candidate_packed_for_its_confirmation_comes_back_whole_once_and_in_order():
    """A file's candidates travel as one byte string (``packed_candidate``, concatenated in any order) and come
    back as the Candidates they were, each once (both images may propose a pair), sorted: frame files' numbers,
    offsets past 4 GiB, lengths, distances."""
    given = [candidates.Candidate(Frame(3, 5 << 32, 70_000), Frame(0, 12, 4_000), 7),
             candidates.Candidate(Frame(0, 9, 1), Frame(2**31 - 1, (1 << 40) + 3, 2**32 - 1), 0),
             candidates.Candidate(Frame(0, 9, 1), Frame(1, 0, 2), 20)]
    combine = candidates.Concatenated()
    accumulators = [combine.add_input(combine.create_accumulator(), candidates.packed_candidate(candidate))
                    for candidate in reversed(given + given[:1])]
    packed = combine.extract_output(combine.merge_accumulators(accumulators))
    assert len(packed) == (len(given) + 1) * candidates.CANDIDATE.size == 160
    assert candidates.unpacked_candidates(packed) == sorted(given)


def test_copies_linked_in_a_star_start_with_one_label():
    """The candidates link copies of one picture to the copy with the smallest member id; labels order by it
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


def _confirmed_pairs(hashes, pictures):
    """(i, j, distance) of every candidate whose pictures agree: both checks."""
    return [(i, j, d) for i, j, d in _candidates(hashes) if picture_check.same_picture(pictures[i], pictures[j])]


def _candidates(hashes):
    """(i, j, distance) of every candidate: each image's NEIGHBOURS nearest within the threshold."""
    return [tuple(pair) for pair in hash_neighbours.nearest_pairs(
        np.array(hashes, dtype=np.uint64), THRESHOLD, candidates.NEIGHBOURS).tolist()]


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
    proposed = {(i, j) for i, j, _ in _candidates(hashes)}
    found, confirmed = collections.Counter(), 0
    for pair in pairs:
        a, b = index[pair['original']], index[pair['twin']]
        same = picture_check.same_picture(thumbnails[a], thumbnails[b])
        confirmed += same
        found[pair['transform']] += same and (min(a, b), max(a, b)) in proposed
    assert sum(found.values()) >= 0.95 * len(pairs), found
    assert all(found[kind] >= 8 for kind in TRANSFORMS), found  # no kind of copy is lost
    assert confirmed >= len(pairs) - 1  # the check refuses at most one copy the hash may have found


def test_planted_corpus_strangers_are_not_confirmed(planted):
    pairs, index, hashes, thumbnails = planted
    twins = {frozenset((index[pair['original']], index[pair['twin']])) for pair in pairs}
    strangers = [(i, j, d) for i, j, d in _confirmed_pairs(hashes, thumbnails)
                 if frozenset((i, j)) not in twins]
    assert len(_with_candidates(strangers)) < 0.01 * len(hashes)


def test_distinct_images_almost_never_have_a_confirmed_candidate(distinct):
    """The hash alone gives many of these images a candidate (one style shares a layout); the check
    leaves fewer than 1% of them with one."""
    style, hashes, thumbnails = distinct
    proposed = _candidates(hashes)
    confirmed = _confirmed_pairs(hashes, thumbnails)
    if style == 'one-style':
        assert len(_with_candidates(proposed)) >= 0.2 * len(hashes)  # what the check is there for
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
