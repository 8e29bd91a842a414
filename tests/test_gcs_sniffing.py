"""A gs:// build of phone, camera and web formats, some named wrongly or not at all: every image written, the
others named by extension, and no object whose name says it is no image ever read (the proxy's record of
every request that reached the emulator)."""
import collections
import json

from imgrec.contract import layout
from imgrec.imaging import file_types
from imgrec.pipelines import launcher
from imgrec.samples import torture
from tests.fault_proxy import READ, faulty_gcs, gcs_emulator  # noqa: F401  (fixtures)

_CORPUS = torture.corpus()
IMAGES = {  # source -> the corpus case whose bytes it holds
    'phones/IMG_0001.HEIC': 'alpha/IMG_0001.HEIC',
    'phones/IMG_0002': 'alpha/IMG_0002',  # a JPEG without an extension
    'phones/photo.avif': 'alpha/photo.avif',
    'web/photo.jxl': 'alpha/photo.jxl',
    'web/scan.jp2': 'alpha/scan.jp2',
    'web/drawing.jpg': 'alpha/drawing.jpg',  # a PNG named .jpg
    'web/export.img': 'alpha/export.img',  # a WebP under an extension nobody knows
}
NOT_READ = {'phones/IMG_0001.MOV': b'\x00\x00\x00\x14ftypqt  ' + bytes(64), 'phones/IMG_0001.AAE': b'<plist/>',
            'phones/._IMG_0002': bytes(64), 'web/index.json': b'{}', 'web/notes.txt': b'hello'}
SNIFFED_NOT_IMAGES = {'web/LICENSE': b'Permission is hereby granted\n'}


def test_a_gcs_build_reads_no_object_named_as_no_image(faulty_gcs, gcs_emulator, tmp_path):  # noqa: F811
    bucket = gcs_emulator.create_bucket('sniffing')
    files = {**{source: _CORPUS[case][0] for source, case in IMAGES.items()}, **NOT_READ, **SNIFFED_NOT_IMAGES}
    for source, data in files.items():
        gcs_emulator.upload_bytes(f'{bucket}/in/{source}', data)
    first = len(faulty_gcs.timeline)
    launcher.run(['--input', f'{bucket}/in', '--output', f'{bucket}/out', '--image_size', '32', '--version', 'v1',
                  '--splits', 'train=1', '--direct_running_mode', 'in_memory'])

    timeline = faulty_gcs.timeline[first:]
    named = {timed.name for timed in timeline}
    assert not named & {f'in/{source}' for source in NOT_READ}  # no read, no metadata request: listed only
    requests = collections.Counter((timed.name, timed.ranged) for timed in timeline
                                   if timed.kind == READ and timed.name.startswith('in/'))
    # A name that says nothing costs one ranged read of its head; an image among them is read whole after.
    unknown = [source for source in files if file_types.kind_by_name(source) == file_types.UNKNOWN]
    assert sorted(unknown) == ['phones/IMG_0002', 'web/LICENSE', 'web/export.img']
    assert {name: n for (name, ranged), n in requests.items() if ranged} == {f'in/{source}': 1 for source in unknown}
    assert {name for (name, ranged) in requests if not ranged} == {f'in/{source}' for source in IMAGES}

    document = json.loads(gcs_emulator.read_bytes(f'{bucket}/out/v1/{layout.DATASET_JSON}'))
    assert document['counts']['written'] == len(IMAGES)
    assert document['counts']['ignored'] == len(NOT_READ) + len(SNIFFED_NOT_IMAGES)
    assert document['ignored_files'] == {
        '.mov': {'count': 1, 'example': 'phones/IMG_0001.MOV'}, '.aae': {'count': 1, 'example': 'phones/IMG_0001.AAE'},
        '._*': {'count': 1, 'example': 'phones/._IMG_0002'}, '.json': {'count': 1, 'example': 'web/index.json'},
        '.txt': {'count': 1, 'example': 'web/notes.txt'}, '(none)': {'count': 1, 'example': 'web/LICENSE'}}
    assert {key: n for key, n in document['decoding']['decisions'].items() if key.startswith('format=')} == {
        'format=HEIF': 1, 'format=JPEG': 1, 'format=AVIF': 1, 'format=JXL': 1, 'format=JPEG2000': 1,
        'format=PNG': 1, 'format=WEBP': 1}
