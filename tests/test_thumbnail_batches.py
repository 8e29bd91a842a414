"""The near-duplicate check confirms a bucket's candidates together (``perceptual_hash.same_pictures``): each
pair's distance, and so each decision, is the one it gets alone."""
import numpy as np

from imgrec.imaging import perceptual_hash as ph


def _pairs(count, seed=3):
    """Pairs of 8x8 colour thumbnails: unrelated ones, and near copies (levels moved a little)."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(count):
        a = rng.integers(0, 256, ph.THUMBNAIL_BYTES, dtype=np.uint8)
        b = (np.clip(a.astype(int) + rng.integers(-14, 15, a.size), 0, 255).astype(np.uint8) if i % 2
             else rng.integers(0, 256, a.size, dtype=np.uint8))
        pairs.append((a.tobytes(), b.tobytes()))
    return pairs


def test_distances_of_many_pairs_at_once_are_each_pairs_own():
    pairs = _pairs(ph.PAIRS_AT_ONCE + 37)  # more than one block
    together = ph.thumbnail_distances([a for a, _ in pairs], [b for _, b in pairs])
    alone = [ph.thumbnail_distance(a, b) for a, b in pairs]
    assert [float(d) for d in together] == alone
    decisions = [d <= ph.THUMBNAIL_THRESHOLD for d in alone]
    assert any(decisions) and not all(decisions)  # the pairs straddle the threshold


def test_same_pictures_decides_each_pair_as_same_picture_does():
    pairs = _pairs(40)
    pairs[3] = (pairs[3][0], None)  # a record from before thumbnails were kept is never confirmed
    pairs[8] = (None, None)
    assert ph.same_pictures(pairs) == [ph.same_picture(a, b) for a, b in pairs]
    assert ph.same_pictures(pairs)[3] is False and ph.same_pictures([]) == []
