"""Ranged reads that come back short: a file or object that ends before the bytes a record names."""


class TruncatedRead(ValueError):
    """A file or object ends before the byte range a record index or reference names: no retry mends it."""


def checked_range(path: str, start: int, end: int, data: bytes) -> bytes:
    """``data``, the bytes read for [start, end) of ``path``; raises TruncatedRead when it is short."""
    if len(data) != end - start:
        raise TruncatedRead(f'{path} ends at {start + len(data)}, before byte {end} of a record')
    return data
