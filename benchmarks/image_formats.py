"""What knowing an image by its bytes and showing its colours cost: the listing of files whose name says
nothing (each a ranged read of its head) against files named as images, and the per-image step
(decode, resize, encode) of photos with a wide-gamut ICC profile against the same photos without one.

    python -m benchmarks.image_formats [--files 2000] [--remote_files 400] [--delay_ms 20] [--photos 12]

Listing: ``class_folder_listing`` over one class folder of small JPEGs, all named ``.jpg`` or all without an
extension, alternately (3 rounds each), locally and on gs:// (the tests' GCS emulator through
``tests.fault_proxy``, each request held back ``--delay_ms`` as a distant service's round trip would),
the gs:// heads read on ``listing.SNIFF_THREADS`` threads as the job's listing reads them.
ICC: ``image_ops.decode_resize_encode`` at 224x224 of 12 MP JPEGs (decoded at 1/8 by DCT scaling) and
3 MP PNGs (decoded whole), with colord-data's Adobe RGB profile, with an sRGB one (left as it is) and
without, interleaved; medians of 5 rounds, milliseconds an image on one core.
"""
import argparse
import io
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from PIL import Image, ImageCms  # noqa: E402

from imgrec.imaging import image_ops  # noqa: E402
from imgrec.imaging.record_options import RecordOptions  # noqa: E402
from imgrec.samples import torture  # noqa: E402
from imgrec.storage import gcs_storage, request_counts, storage  # noqa: E402
from imgrec.contract import counters  # noqa: E402
from imgrec.transforms import listing  # noqa: E402

ROUNDS = 3


def _photo(width, height, seed):
    """A photo-like picture: a colour gradient under noise (flat colour would flatter the codecs)."""
    gradient = Image.linear_gradient('L').resize((width, height))
    noise = Image.effect_noise((width, height), 40 + seed)
    return Image.merge('RGB', (gradient, noise, gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))


def _encoded(image, fmt, icc_profile):
    out = io.BytesIO()
    options = {'quality': 92} if fmt == 'JPEG' else {'compress_level': 1}
    image.save(out, fmt, **({'icc_profile': icc_profile} if icc_profile else {}), **options)
    return out.getvalue()


def icc_cost(photos):
    adobe = torture.profile('AdobeRGB1998')
    if adobe is None:
        raise SystemExit(f'colord-data is not installed ({torture.PROFILES}): apt-get install colord-data')
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile('sRGB')).tobytes()
    options = RecordOptions((224, 224))
    for fmt, size in (('JPEG', (4000, 3000)), ('PNG', (2000, 1500))):
        pictures = [_photo(*size, seed) for seed in range(photos)]
        kinds = {'none': None, 'sRGB': srgb, 'Adobe RGB': adobe}
        data = {kind: [_encoded(picture, fmt, icc) for picture in pictures] for kind, icc in kinds.items()}
        timings = {kind: [] for kind in kinds}
        for _ in range(5):
            for kind, files in data.items():
                start = time.process_time()
                for one in files:
                    image_ops.decode_resize_encode(one, options)
                timings[kind].append((time.process_time() - start) / len(files) * 1000)
        medians = {kind: statistics.median(values) for kind, values in timings.items()}
        print(f'{fmt} {size[0]}x{size[1]} -> 224x224, ms an image (CPU): '
              + ', '.join(f'{kind} {ms:.1f}' for kind, ms in medians.items())
              + f"; Adobe RGB / none {medians['Adobe RGB'] / medians['none']:.3f}")


def _write_folder(root, count, named):
    folder = os.path.join(root, 'cats')
    os.makedirs(folder)
    jpeg = _encoded(_photo(64, 48, 0), 'JPEG', None)
    for i in range(count):
        with open(os.path.join(folder, f'IMG_{i:05d}' + ('.jpg' if named else '')), 'wb') as stream:
            stream.write(jpeg)
    return folder


def _timed_listing(root, folder, store):
    start = time.perf_counter()
    found = list(listing.class_folder_listing(root, folder, store))
    return time.perf_counter() - start, len(found)


def local_sniffing(files):
    with tempfile.TemporaryDirectory() as named_root, tempfile.TemporaryDirectory() as bare_root:
        folders = {True: _write_folder(named_root, files, True), False: _write_folder(bare_root, files, False)}
        roots = {True: named_root, False: bare_root}
        store = storage.storage_for(named_root)
        times = {True: [], False: []}
        for _ in range(ROUNDS):
            for named in (True, False):
                times[named].append(_timed_listing(roots[named], folders[named], store)[0])
    named, bare = statistics.median(times[True]), statistics.median(times[False])
    print(f'local, {files} files: named .jpg {named * 1000:.0f} ms, no extension {bare * 1000:.0f} ms '
          f'({bare / named:.2f}x; {(bare - named) / files * 1e6:.0f} us a file sniffed)')


def remote_sniffing(files, delay_ms):
    from benchmarks import storage_runs  # pylint: disable=import-outside-toplevel  # starts the emulator's modules
    jpeg = _encoded(_photo(64, 48, 0), 'JPEG', None)
    with storage_runs.Service() as service:
        bucket = service.create_bucket('sniffing')
        for i in range(files):
            service.upload_bytes(f'{bucket}/named/cats/IMG_{i:05d}.jpg', jpeg)
            service.upload_bytes(f'{bucket}/bare/cats/IMG_{i:05d}', jpeg)
        os.environ[gcs_storage.EMULATOR_HOST] = service.proxy.url
        service.proxy.configure(delay_s=delay_ms / 1000)
        store = storage.storage_for(bucket)
        times = {True: [], False: []}
        ranged = {}
        for _ in range(ROUNDS):
            for named in (True, False):
                root = f"{bucket}/{'named' if named else 'bare'}"
                before = request_counts.made()
                elapsed, _ = _timed_listing(root, f'{root}/cats', store)
                times[named].append(elapsed)
                ranged[named] = (request_counts.made() - before)[counters.RANGED_READS]
    named, bare = statistics.median(times[True]), statistics.median(times[False])
    print(f'gs:// ({delay_ms} ms a request), {files} files: named .jpg {named * 1000:.0f} ms '
          f'({ranged[True]} ranged reads), no extension {bare * 1000:.0f} ms ({ranged[False]} ranged reads, '
          f'{listing.SNIFF_THREADS} at a time): {(bare - named) / files * 1000:.1f} ms a file sniffed')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--files', type=int, default=2000)
    parser.add_argument('--remote_files', type=int, default=400)
    parser.add_argument('--delay_ms', type=float, default=20)
    parser.add_argument('--photos', type=int, default=12)
    args = parser.parse_args(argv)
    local_sniffing(args.files)
    remote_sniffing(args.remote_files, args.delay_ms)
    icc_cost(args.photos)


if __name__ == '__main__':
    main()
