"""picture_check's own arithmetic against what it stands for (the rest of the check: test_near_duplicates_*)."""
import numpy as np
from PIL import Image

from imgrec.imaging import picture_check


def _direct_bound(first: picture_check.Picture, second: picture_check.Picture) -> float:
    """The largest correlation over the check's alignments and strips, straight from the pixels (float64)."""
    side, dropped = picture_check.SIDE, picture_check.DROPPED_ROWS
    best = -np.inf
    for zoom_a, zoom_b in zip(picture_check._ZOOM_A, picture_check._ZOOM_B):
        for start in range(side - dropped + 1):
            kept = np.r_[0:start, start + dropped:side]
            x = first.grey[zoom_a][kept].astype(np.float64).ravel()
            y = second.grey[zoom_b][kept].astype(np.float64).ravel()
            x, y = x - x.mean(), y - y.mean()
            if min((x * x).sum(), (y * y).sum()) < picture_check.PLAIN_ROWS * x.size:
                return np.inf
            best = max(best, (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))
    return best


def test_the_correlation_bound_is_the_largest_correlation_over_alignments_and_strips():
    rng = np.random.default_rng(7)
    smooth = [np.kron(rng.integers(0, 256, (8, 8, 3)), np.ones((8, 8, 1))).astype(np.uint8) for _ in range(4)]
    noisy = [np.clip(image + rng.normal(0, 12, image.shape), 0, 255).astype(np.uint8) for image in smooth]
    barred = np.full((64, 64, 3), 120, dtype=np.uint8)
    barred[20:26] = 250  # plain but for a bar: no bound
    pictures = [picture_check.from_image(Image.fromarray(image)) for image in smooth + noisy + [barred]]
    pairs = [(a, b) for a in pictures for b in pictures if a is not b]
    bounds = picture_check.correlation_bounds(pairs)
    direct = np.array([_direct_bound(a, b) for a, b in pairs])
    assert np.array_equal(np.isinf(bounds), np.isinf(direct)) and np.isinf(bounds).any()
    finite = np.isfinite(direct)
    assert np.allclose(bounds[finite], direct[finite], rtol=0, atol=1e-5)
    for (a, b), bound in zip(pairs, bounds):
        if not a.flat and not b.flat:
            assert bound >= picture_check.compare(a, b)[0] - picture_check.BOUND_MARGIN
