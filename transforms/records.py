"""The element types that flow between the build's transforms."""
import typing


class ImageRef(typing.NamedTuple):
    """One listed input image: where to read it, its name in the dataset and its class."""
    path: str    # full path or gs:// URL to read
    source: str  # relative to --input, or the manifest's path as written
    label: str   # class name
    split: str = ''


class EncodedImage(typing.NamedTuple):
    """An image decoded, resized and re-encoded as JPEG."""
    ref: ImageRef
    sha256: str  # hex digest of the source file's bytes
    jpeg: bytes
    height: int
    width: int


class ShardRecord(typing.NamedTuple):
    """A serialised Example with what the shard assignment needs to know about it."""
    split: str
    label: int
    order_key: tuple  # (salted hash of the source, source): sorts records deterministically
    example: bytes


class Rejected(typing.NamedTuple):
    """An input that was not written, and why: one line of quarantine.jsonl."""
    source: str
    reason: str
    message: str
    bytes: int = -1  # size of the source file, -1 when it could not be read
    split: str = ''
