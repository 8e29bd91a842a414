"""What a file is, by its name or its first bytes (imgrec.imaging.file_types), what a listing reads to tell
(the heads of files whose name says nothing, no other byte; on gs://, tests/test_gcs_sniffing.py), and how the files a build left out are named:
by extension, with a count and an example each, in the summary and the report."""
import pytest

from imgrec.imaging import file_types
from imgrec.pipelines.summary import _ignored_lines
from imgrec.samples import torture
from imgrec.storage import storage
from imgrec.transforms import listing
from imgrec.transforms.elements import ImageRef
from imgrec.versions.report.sections import inputs_section

CORPUS = torture.corpus()


@pytest.mark.parametrize('source', sorted(source for source, (data, expected) in CORPUS.items()
                                          if expected.fate == torture.WRITTEN))
def test_every_image_of_the_corpus_is_known_by_its_first_bytes(source):
    data, expected = CORPUS[source]
    fmt = next(d.split('=')[1] for d in expected.decisions if d.startswith('format='))
    assert file_types.sniffed_format(data[:file_types.SNIFF_BYTES]) == fmt


@pytest.mark.parametrize('head', [b'', b'BM is how this note starts\n', b'<!DOCTYPE html>', b'{"a": 1}',
                                  b'\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00qt  ', b'PK\x03\x04',
                                  b'\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom'])
def test_other_bytes_are_no_image(head):
    assert file_types.sniffed_format(head) is None


@pytest.mark.parametrize('name, kind, key', [
    ('cats/IMG_0001.HEIC', file_types.IMAGE, '.heic'),
    ('cats/photo.avif', file_types.IMAGE, '.avif'),
    ('cats/a.JXL', file_types.IMAGE, '.jxl'),
    ('cats/scan.jp2', file_types.IMAGE, '.jp2'),
    ('cats/notes.txt', file_types.OTHER, '.txt'),
    ('cats/IMG_0001.MOV', file_types.OTHER, '.mov'),
    ('cats/._IMG_0001.jpg', file_types.OTHER, file_types.RESOURCE_FORK),
    ('cats/.DS_Store', file_types.OTHER, '.ds_store'),
    ('cats/IMG_0001', file_types.UNKNOWN, file_types.NO_EXTENSION),
    ('cats/export.img', file_types.UNKNOWN, '.img'),
    ('cats/v1.2/IMG_0001', file_types.UNKNOWN, file_types.NO_EXTENSION),
])
def test_a_name_says_image_other_or_nothing(name, kind, key):
    assert file_types.kind_by_name(name) == kind
    assert file_types.extension(name) == key


TABLE = {'.txt': {'count': 2, 'example': 'a/notes.txt'}, '.heic': {'count': 412, 'example': 'a/IMG_1.heic'},
         '(none)': {'count': 1, 'example': 'b/README'}}


def test_the_summary_names_ignored_files_by_extension_most_first():
    assert _ignored_lines(TABLE) == ['  ignored, not images by name or bytes: 412 .heic (e.g. a/IMG_1.heic), '
                                     '2 .txt (e.g. a/notes.txt), 1 (none) (e.g. b/README)']
    assert _ignored_lines({}) == []
    many = {f'.x{i}': {'count': 10 - i, 'example': f'a/f.x{i}'} for i in range(8)}
    assert _ignored_lines(many)[0].endswith('6 .x4 (e.g. a/f.x4) and 12 more under 3 other extensions')


def test_the_report_shows_the_formats_written_and_the_files_ignored():
    html = ''.join(inputs_section({'decoding': {'decisions': {'format=HEIF': 3, 'format=JPEG': 5, 'mode=RGB': 8}},
                                   'ignored_files': TABLE}))
    assert html.index('JPEG') < html.index('HEIF') and 'mode=RGB' not in html
    assert html.index('.heic') < html.index('.txt') < html.index('(none)') and 'a/IMG_1.heic' in html


class RecordedReads:
    """A real storage that records the ranged reads made through it."""

    def __init__(self, store):
        self._store = store
        self.ranges = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    def read_range(self, path, start, end):
        self.ranges.append((path.rsplit('/', 1)[-1], start, end))
        return self._store.read_range(path, start, end)


def test_a_listing_reads_the_heads_of_files_whose_name_says_nothing_and_no_other(tmp_path):
    jpeg = CORPUS['alpha/IMG_0002'][0]
    files = {'a.jpg': jpeg, 'b.txt': b'text', 'IMG_0003': jpeg, 'LICENSE': b'Permission is hereby granted',
             'untitled': b'', 'clip.MOV': jpeg, '._a.jpg': jpeg, 'scan.img': CORPUS['alpha/scan.jp2'][0]}
    for name, data in files.items():
        (tmp_path / 'cats' / name).parent.mkdir(exist_ok=True)
        (tmp_path / 'cats' / name).write_bytes(data)
    recorded = RecordedReads(storage.storage_for(str(tmp_path)))
    found = list(listing.class_folder_listing(str(tmp_path), str(tmp_path / 'cats'), recorded))
    assert sorted(ref.source for ref in found if isinstance(ref, ImageRef)) == [
        'cats/IMG_0003', 'cats/a.jpg', 'cats/scan.img']
    assert sorted(name for name in found if isinstance(name, str)) == [
        'cats/._a.jpg', 'cats/LICENSE', 'cats/b.txt', 'cats/clip.MOV', 'cats/untitled']
    assert sorted(recorded.ranges) == [('IMG_0003', 0, file_types.SNIFF_BYTES), ('LICENSE', 0, 28),
                                       ('scan.img', 0, file_types.SNIFF_BYTES)]
