"""``--profile_input``: runs the input pipeline alone, to tell a slow reader from a slow model."""
import time


def profile(distributed_dataset, steps, global_batch_size):
    """Iterates ``steps`` global batches; returns (seconds to the first batch, images/s after it)."""
    start = time.perf_counter()
    iterator = iter(distributed_dataset)
    next(iterator)
    first_batch = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps - 1):
        next(iterator)
    elapsed = time.perf_counter() - start
    return first_batch, (steps - 1) * global_batch_size / elapsed if steps > 1 else float('nan')
