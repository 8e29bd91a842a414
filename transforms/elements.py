"""The element types that flow between the build's transforms."""
import typing

from imgrec.contract.hashing import order_key


class ImageRef(typing.NamedTuple):
    """One listed input image: where to read it, its name in the dataset and its class."""
    path: str    # full path or gs:// URL to read
    source: str  # relative to --input, or the manifest's path as written
    label: str   # class name
    split: str = ''
    size: int = -1   # bytes, from the listing; -1 when not known
    mtime_ns: int | None = None     # local files: modification time, from the listing
    generation: int | None = None   # gs:// objects: generation, from the listing
    ctime_ns: int | None = None     # local files: inode change time and inode number, from the listing: with the size
    inode: int | None = None        # and mtime, the stamp a refresh compares (docs/reuse.md)


class ClassFolder(typing.NamedTuple):
    """A class folder that holds no image, listed beside the images: so its class is kept, as an empty
    class, instead of vanishing from the labels (``imgrec.transforms.labels.ResolveLabels`` takes it out)."""
    label: str
    path: str


class EncodedImage(typing.NamedTuple):
    """An image decoded, resized and re-encoded as JPEG."""
    ref: ImageRef
    sha256: str  # hex digest of the source file's bytes
    jpeg: bytes
    height: int
    width: int
    source_bytes: int = 0  # size of the source file
    decisions: tuple = ()  # what decoding did, e.g. ('format=PNG', 'mode=P', 'alpha_composited')
    perceptual_hash: str | None = None  # 16 hex digits a hash (imgrec.imaging.perceptual_hash); None when not hashed
    source_width: int | None = None     # of the source, upright (after its EXIF orientation)
    source_height: int | None = None
    upscaled: bool | None = None        # the source was enlarged to reach the target size
    encoded_sha256: str | None = None   # hex digest of ``jpeg``; None when not grouped (--near_duplicates off)


class RecordRef(typing.NamedTuple):
    """A serialised Example by reference: everything the graph needs, and where its bytes are.

    Only these light records cross the shuffles; the TFRecord frame itself lies in ``payload_file``
    (a spill file, or a shard) at ``payload_offset``, ``payload_length`` bytes long. An Example's bytes
    do not depend on the shard it lands in, so copying the frame is all a shard writer does.
    """
    source: str
    path: str         # where the source is read from, should it need decoding again
    label_text: str
    split: str
    label: int
    sha256: str       # hex digest of the source file's bytes
    source_size: int
    mtime_ns: int     # of the source, as listed (local inputs), or None
    generation: int   # of the source, as listed (gs:// inputs), or None
    decisions: tuple  # what decoding did, e.g. ('format=PNG', 'mode=P', 'alpha_composited')
    payload_file: str  # None for a previous version's duplicate: no frame until it is decoded
    payload_offset: int
    payload_length: int
    perceptual_hash: str | None = None  # 16 hex digits a hash; None when not hashed (--near_duplicates off)
    source_width: int | None = None     # of the source, upright
    source_height: int | None = None
    upscaled: bool | None = None        # the source was enlarged to reach the target size
    published_split: str | None = None  # the split the previous version wrote these bytes in (imgrec.transforms.published)
    ctime_ns: int | None = None         # of the source, as listed (local inputs), or None
    inode: int | None = None
    encoded_sha256: str | None = None   # hex digest of the Example's JPEG; None when not grouped (--near_duplicates off)

    @property
    def order_key(self):
        """(salted hash of the source, source): sorts records deterministically, derived, never shuffled."""
        return order_key(self.source)

    def __reduce__(self):
        """Pickled compactly (``_packed``), as Beam's coder pickles a record each time it crosses a stage."""
        return _record_ref, _packed(self)


def _packed(record):
    """The fields of ``record`` with the sha256s and the perceptual hashes as bytes (32 and 16) and a path that
    ends in the source as its prefix (as bytes, to tell it apart): a record crosses the local runner's data
    plane several times, and each worker keeps the buffer of each stage's largest output, so its size is the
    memory the build holds (docs/benchmarks.md, issue 39). Exact: ``_record_ref`` gives the same record back."""
    fields = list(record)
    source, path = record.source, record.path
    if isinstance(path, str) and isinstance(source, str) and source and path.endswith(source):
        fields[_PATH] = path[:-len(source)].encode('utf-8')
    for index in _HEX:
        packed = _hex_bytes(fields[index])
        if packed is not None:
            fields[index] = packed
    return tuple(fields)


_SOURCE, _PATH = RecordRef._fields.index('source'), RecordRef._fields.index('path')
# The fields held as hex digits, packed as their bytes.
_HEX = tuple(RecordRef._fields.index(name) for name in ('sha256', 'perceptual_hash', 'encoded_sha256'))


def _hex_bytes(text):
    """The bytes of a lowercase hex ``text`` that ``bytes.hex`` gives back exactly, else None (C speed: this runs
    each time a record crosses a stage)."""
    if not isinstance(text, str) or not text or len(text) % 2:
        return None
    try:
        packed = bytes.fromhex(text)
    except ValueError:
        return None
    return packed if packed.hex() == text else None


def _record_ref(*packed):
    """The RecordRef of ``_packed`` fields."""
    fields = list(packed)
    if isinstance(fields[_PATH], bytes):
        fields[_PATH] = fields[_PATH].decode('utf-8') + fields[_SOURCE]
    for index in _HEX:
        if isinstance(fields[index], bytes):
            fields[index] = fields[index].hex()
    return RecordRef(*fields)


class GroupedImage(typing.NamedTuple):
    """What the near-duplicate groups need of a grouped image's record (``RecordRef``'s names): they carry this,
    not the record, since each worker of the local runner keeps a buffer of every stage's output
    (docs/benchmarks.md, issue 39); the record meets its group's split once, when it is dealt
    (``imgrec.transforms.splits``)."""
    source: str
    label_text: str
    label: int
    split: str
    perceptual_hash: str | None
    published_split: str | None

    @classmethod
    def of(cls, record):
        return cls(record.source, record.label_text, record.label, record.split, record.perceptual_hash,
                   record.published_split)

    @property
    def order_key(self):
        return order_key(self.source)


class Rejected(typing.NamedTuple):
    """An input that was not written, and why: one line of quarantine.jsonl."""
    source: str
    reason: str  # one of REASONS
    message: str
    bytes: int = -1  # size of the source file, -1 when it could not be read
    split: str = ''
    label: str = ''
    mtime_ns: int | None = None    # of the source, as listed: a refresh re-reads it only if it changed
    generation: int | None = None
    ctime_ns: int | None = None
    inode: int | None = None


class Duplicate(typing.NamedTuple):
    """An input not written because the same bytes under the same label were: one line of duplicates.jsonl."""
    source: str
    duplicate_of: str  # the copy that was written: the smallest source name
    label: str
    sha256: str
    bytes: int
    split: str
    mtime_ns: int | None = None    # of the source, as listed: a refresh re-reads it only if it changed
    generation: int | None = None
    ctime_ns: int | None = None
    inode: int | None = None


def stamp(item):
    """What a refresh compares of a source besides its size and class: (mtime_ns, ctime_ns, inode) of a local
    file, as git's index keeps them, or the generation of a gs:// object (the rest None). ``item``: any
    element above."""
    return item.mtime_ns, item.ctime_ns, item.inode, item.generation


# The kinds of a Tally: the images listed in a split, and the build's ignored, decoded and upscaled images.
LISTED, IGNORED, DECODED, UPSCALED = 'listed', 'ignored', 'decoded', 'upscaled'


class Tally(typing.NamedTuple):
    """A key of the counts Publish reports, summed in one combine (``imgrec.pipelines.graph``) from
    (Tally, count) pairs: LISTED, the images listed in ``split`` (as hashed, and the moves of the dealing,
    ``imgrec.transforms.splits.MOVES``); IGNORED, DECODED, UPSCALED: the build's (``split`` empty)."""
    kind: str
    split: str = ''

