"""What a file is: an image by its name, another kind of file by its name, or unknown until its first bytes
are read.

A listing must not read every object of a bucket, so a name decides wherever it can: an image extension
lists the file (its read quarantines it if the bytes are no image), a known other extension (text, data,
video, camera raw, system files) ignores it unread. Only a name that says nothing (no extension, or one in
neither list) costs a read of its first ``SNIFF_BYTES``, recognised by the signatures below: the formats
``image_ops`` decodes, and no others.
"""
import os

# Extensions of the formats image_ops decodes (lower case).
IMAGE_EXTENSIONS = frozenset((
    '.jpg', '.jpeg', '.jpe', '.jfif', '.png', '.apng', '.gif', '.bmp', '.webp', '.tif', '.tiff',
    '.avif', '.avifs', '.heic', '.heics', '.heif', '.heifs', '.hif', '.jxl', '.jp2', '.j2k', '.j2c', '.jpf', '.jpx'))
# Extensions of files that are never read: what sits beside images in real folders. Camera raw, vector and
# layered formats are here too: the build does not decode them, and the summary names them.
OTHER_EXTENSIONS = frozenset((
    '.txt', '.md', '.rst', '.csv', '.tsv', '.json', '.jsonl', '.xml', '.yaml', '.yml', '.html', '.htm', '.pdf',
    '.doc', '.docx', '.xls', '.xlsx', '.log', '.ini', '.cfg', '.db', '.sqlite', '.zip', '.tar', '.gz', '.tgz',
    '.bz2', '.xz', '.7z', '.rar', '.py', '.ipynb', '.sh', '.js', '.css', '.pkl', '.npy', '.npz', '.parquet',
    '.tfrecord', '.mp4', '.mov', '.avi', '.mkv', '.webm', '.m4v', '.3gp', '.mp3', '.wav', '.aac', '.m4a',
    '.aae', '.xmp', '.thm', '.lnk', '.url', '.ds_store', '.svg', '.eps', '.ai', '.psd', '.ico', '.icns',
    '.dng', '.cr2', '.cr3', '.nef', '.arw', '.orf', '.rw2', '.raf', '.srw', '.pef', '.raw'))
# Enough of a file's head for every signature below.
SNIFF_BYTES = 64
# The table key of a file without an extension, and of a macOS resource fork ('._name').
NO_EXTENSION = '(none)'
RESOURCE_FORK = '._*'
IMAGE, OTHER, UNKNOWN = 'image', 'other', 'unknown'

# ISO base media file brands of still images and image sequences (HEIF, AVIF).
_HEIF_BRANDS = frozenset((b'heic', b'heix', b'heim', b'heis', b'hevc', b'hevx', b'hevm', b'hevs', b'mif1',
                          b'msf1', b'avif', b'avis'))
# A BMP's second header says its own size, one of these: two letters 'BM' alone start many text files.
_BMP_INFO_SIZES = frozenset((12, 16, 40, 52, 56, 64, 108, 124))
_SIGNATURES = (
    (b'\xff\xd8\xff', 'JPEG'),
    (b'\x89PNG\r\n\x1a\n', 'PNG'),
    (b'GIF87a', 'GIF'),
    (b'GIF89a', 'GIF'),
    (b'II*\x00', 'TIFF'),
    (b'MM\x00*', 'TIFF'),
    (b'\xff\x0a', 'JXL'),  # a bare JPEG XL codestream
    (b'\x00\x00\x00\x0cJXL \r\n\x87\n', 'JXL'),  # JPEG XL in its container
    (b'\x00\x00\x00\x0cjP  \r\n\x87\n', 'JPEG2000'),  # JP2
    (b'\xff\x4f\xff\x51', 'JPEG2000'),  # a bare J2K codestream
)


def extension(source):
    """The key a file is counted under among ignored files: its extension in lower case, ``RESOURCE_FORK``
    for '._name', a dotfile's whole name ('.ds_store'), or ``NO_EXTENSION``."""
    name = source.rsplit('/', 1)[-1]
    if name.startswith('._'):
        return RESOURCE_FORK
    if name.startswith('.') and '.' not in name[1:]:
        return name.lower()
    return os.path.splitext(name)[1].lower() or NO_EXTENSION


def kind_by_name(source):
    """IMAGE, OTHER or UNKNOWN (its bytes tell) for a file's name or path."""
    key = extension(source)
    if key == RESOURCE_FORK or key in OTHER_EXTENSIONS:
        return OTHER
    return IMAGE if key in IMAGE_EXTENSIONS else UNKNOWN


def sniffed_format(head):
    """The image format its first bytes (at least ``SNIFF_BYTES``, or the whole file) show, or None."""
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return name
    if head[:2] == b'BM' and int.from_bytes(head[14:18], 'little') in _BMP_INFO_SIZES:
        return 'BMP'
    if head[:4] == b'RIFF' and head[8:12] == b'WEBP':
        return 'WEBP'
    if head[4:8] == b'ftyp':  # ISO base media: the major brand, then the compatible ones
        box_end = min(len(head), int.from_bytes(head[:4], 'big'))
        brands = [head[8:12]] + [head[start:start + 4] for start in range(16, box_end - 3, 4)]
        if _HEIF_BRANDS.intersection(brands):
            return 'AVIF' if {b'avif', b'avis'}.intersection(brands) else 'HEIF'
    return None
