"""Each image's few nearest by perceptual hash: the near-duplicate candidates, bounded per image.

A fixed threshold on the hash distance lets in every pair of a collection of one kind (digits, pages, icons):
such images share their lowest waves, so within a class nearly every pair is within any threshold that
finds crops and captions, and the candidates grow with the square of a class. Here an image proposes only
its ``k`` nearest within the threshold (ties: the smaller position, so the same inputs give the same pairs),
and a pair is a candidate when either image proposes the other: at most ``k`` proposals an image, so the
pixel checks grow with the number of images, whatever the collection looks like. A copy is nearer its
original than the other images of its kind (its hash moved a few bits), so it stays among the nearest.

The distances are computed for every pair, a block of rows at a time (numpy popcounts and the choice of the
nearest: ~6 ns a pair, and memory bounded by the block): band buckets only save work when bands are wide, and at
the thresholds that find crops (about 20 of 64 bits) a band is 3 bits, so the buckets compared more pairs than
there are.
Plain functions of numbers: no Beam, no Pillow.
"""
import numpy as np

# Rows whose distances are computed at once (their uint64 temporaries stay in cache), and rows whose nearest are
# chosen at once (a uint8 block of BLOCK_ROWS x images: 5 MB at 20,000 images).
_PASS_ROWS = 16
BLOCK_ROWS = 256
_FAR = np.uint8(255)


def distances(rows: np.ndarray, columns: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The len(rows) x len(columns) distances (uint8) of images given as arrays of their hashes (n x hashes,
    uint64): each pair's smallest Hamming distance over its hashes, as a pair near on either hash is a
    candidate (``perceptual_hash.nearest_distance``). ``out``: where to write them."""
    return _distances(rows, np.ascontiguousarray(columns.T), out)


def _distances(rows: np.ndarray, by_hash: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``distances`` with the columns given hash by hash (hashes x n, contiguous: made once, not a block)."""
    out = np.empty((len(rows), by_hash.shape[1]), dtype=np.uint8) if out is None else out
    xor = np.empty((min(_PASS_ROWS, len(rows)), by_hash.shape[1]), dtype=np.uint64)
    bits = np.empty(xor.shape, dtype=np.uint8)
    for start in range(0, len(rows), _PASS_ROWS):
        part = rows[start:start + _PASS_ROWS]
        xor_part, bits_part, nearest = xor[:len(part)], bits[:len(part)], out[start:start + len(part)]
        for hash_index in range(rows.shape[1]):
            np.bitwise_xor(part[:, hash_index, None], by_hash[hash_index][None, :], out=xor_part)
            if hash_index == 0:
                np.bitwise_count(xor_part, out=nearest)
            else:
                np.bitwise_count(xor_part, out=bits_part)
                np.minimum(nearest, bits_part, out=nearest)
    return out


def _nearest_in_rows(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of each row's ``k`` smallest entries of ``block`` (uint8, _FAR where none may be taken),
    sorted by row then column; ties at the k-th value go to the smaller columns."""
    if k < block.shape[1]:
        kth = np.partition(block, k - 1, axis=1)[:, k - 1]
    else:
        kth = block.max(axis=1)
    kth = np.minimum(kth, _FAR - 1)  # a row with fewer than k takes all it has
    rows, columns = np.nonzero(block <= kth[:, None])
    counts = np.bincount(rows, minlength=len(block))
    if counts.max(initial=0) <= k:
        return rows, columns
    # More at the k-th value than wanted: those below it, then the first ties by column.
    values = block[rows, columns]
    below = np.bincount(rows, weights=values < kth[rows], minlength=len(block)).astype(np.int64)
    tied = values == kth[rows]
    tie_rank = np.cumsum(tied) - 1
    first_tie = np.concatenate([[0], np.cumsum(np.bincount(rows[tied], minlength=len(block)))[:-1]])
    keep = ~tied | (tie_rank - first_tie[rows] < (k - below)[rows])
    return rows[keep], columns[keep]


def nearest_of(hashes: np.ndarray, threshold: int, k: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """(i, j, distance) rows (int64) for each image i from ``start`` to ``stop`` and each j among its ``k`` nearest
    within ``threshold`` (images given by their hashes: n x hashes, uint64, in the order that breaks ties), sorted
    by (i, j)."""
    count = len(hashes)
    stop = count if stop is None else min(stop, count)
    found = [np.zeros((0, 3), dtype=np.int64)]
    if count < 2 or k < 1 or start >= stop:
        return found[0]
    block = np.empty((min(BLOCK_ROWS, stop - start), count), dtype=np.uint8)
    by_hash = np.ascontiguousarray(hashes.T)
    for first in range(start, stop, BLOCK_ROWS):
        rows = hashes[first:min(stop, first + BLOCK_ROWS)]
        part = _distances(rows, by_hash, out=block[:len(rows)])
        part[part > threshold] = _FAR
        part[np.arange(len(rows)), np.arange(first, first + len(rows))] = _FAR  # not itself
        near_rows, near_columns = _nearest_in_rows(part, k)
        found.append(np.stack([near_rows + first, near_columns, part[near_rows, near_columns]], axis=1).astype(np.int64))
    return np.concatenate(found)


def nearest_pairs(hashes: np.ndarray, threshold: int, k: int) -> np.ndarray:
    """Candidates among images given by their hashes (``nearest_of``): (i, j, distance) rows (int64), i < j, each
    pair once, where j is among i's ``k`` nearest within ``threshold`` or i among j's. Sorted by (i, j)."""
    pairs = nearest_of(hashes, threshold, k)
    pairs[:, :2].sort(axis=1)
    return np.unique(pairs, axis=0)
