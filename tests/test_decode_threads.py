"""Decoding on threads of the DoFn's own gives what decoding on its thread gives: the same images, the same
rejections, the same counters and retries (a local in_memory build decodes this way, transforms.decode)."""
import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from PIL import Image

from imgrec.contract import counters
from imgrec.contract.reasons import NOT_AN_IMAGE, READ_ERROR, TRUNCATED
from imgrec_imaging.record_options import RecordOptions
from imgrec_storage import retries, storage
from imgrec_storage.retries import RetryPolicy
from tests.test_quarantine_reads import FlakyReader
from imgrec.transforms.decode import DecodeResizeEncode
from imgrec.transforms.elements import ImageRef


@pytest.fixture
def refs(tmp_path):
    """Photos, a truncated JPEG, a text file and a missing file, in one class folder."""
    folder = tmp_path / 'in' / 'cat'
    folder.mkdir(parents=True)
    paths = []
    for i in range(12):
        path = folder / f'{i:02d}.jpg'
        Image.new('RGB', (60 + 7 * i, 40 + 3 * i), (20 * i, 100, 200 - 10 * i)).save(path, 'JPEG')
        paths.append(path)
    (folder / 'cut.jpg').write_bytes(paths[0].read_bytes()[:200])
    (folder / 'notes.jpg').write_text('not an image')
    names = [path.name for path in paths] + ['cut.jpg', 'notes.jpg', 'gone.jpg']
    return [ImageRef(str(folder / name), f'cat/{name}', 'cat', 'train') for name in names]


class MissingOrFlaky(FlakyReader):
    """FlakyReader, but a path named gone.jpg is missing (a permanent error, never retried)."""

    def __call__(self, path):
        if path.endswith('gone.jpg'):
            raise FileNotFoundError(path)
        return super().__call__(path)


def _decode(refs, log_dir, threads):
    """Everything the decode step gives for ``refs`` with ``threads`` decode threads, and its counters."""
    log_dir.mkdir()
    p = TestPipeline()
    policy = RetryPolicy(deadline_s=60, initial_delay_s=0.01, max_delay_s=0.02)
    batches = [refs[start:start + 4] for start in range(0, len(refs), 4)]
    result = p | beam.Create(batches) | DecodeResizeEncode(
        RecordOptions((16, 16)), storage.storage_for(str(log_dir), policy), read=MissingOrFlaky(log_dir, failures=1),
        with_hash=True,
        decode_threads=threads)
    kept = log_dir / 'kept'
    (result['images'] | 'OneByOne' >> beam.FlatMap(lambda batch: batch) | 'Images' >> beam.Map(lambda image: repr(image._replace(ref=image.ref.source)))
     | 'KeepImages' >> beam.Map(_append, str(kept) + '.images'))
    (result['rejected'] | 'Why' >> beam.Map(lambda r: repr((r.source, r.reason, r.bytes)))
     | 'KeepRejected' >> beam.Map(_append, str(kept) + '.rejected'))
    run = p.run()
    run.wait_until_finish()
    query = run.metrics().query(MetricsFilter())['counters']
    values = {f'{c.key.metric.namespace}/{c.key.metric.name}': c.committed for c in query}
    return {kind: sorted(open(f'{kept}.{kind}').read().splitlines()) for kind in ('images', 'rejected')}, values


def _append(line, path):
    with open(path, 'a') as stream:
        stream.write(line + '\n')


def test_threads_give_the_same_images_rejections_and_counters(refs, tmp_path):
    inline, inline_counters = _decode(refs, tmp_path / 'inline', 0)
    threaded, threaded_counters = _decode(refs, tmp_path / 'threads', 2)
    assert threaded == inline
    assert threaded_counters == inline_counters
    assert len(inline['images']) == 12 and all("perceptual_hash='" in image for image in inline['images'])
    assert [line.split(',')[:2] for line in inline['rejected']] == [
        ["('cat/cut.jpg'", f" '{TRUNCATED}'"], ["('cat/gone.jpg'", f" '{READ_ERROR}'"],
        ["('cat/notes.jpg'", f" '{NOT_AN_IMAGE}'"]]
    assert inline_counters[f'{retries.NAMESPACE}/{retries.READ}'] == 14  # every readable file failed once
    assert inline_counters[str(counters.IMAGES_DECODED)] == 12


def test_one_decode_thread_still_keeps_every_image(refs, tmp_path):
    one, _ = _decode(refs, tmp_path / 'one', 1)
    inline, _ = _decode(refs, tmp_path / 'inline', 0)
    assert one == inline


@pytest.mark.parametrize('threads', [0, 2])
def test_bad_files_inside_a_batch_are_quarantined_alone(refs, tmp_path, threads):
    """A truncated JPEG, a text file and a missing file in the middle of one batch: each is rejected on its
    own, and every photo around them comes out, in the batch's order."""
    photos, bad = refs[:4], refs[12:]
    batch = photos[:2] + bad + photos[2:]
    p = TestPipeline()
    policy = RetryPolicy(deadline_s=60, initial_delay_s=0.01, max_delay_s=0.02)
    result = p | beam.Create([batch]) | DecodeResizeEncode(
        RecordOptions((16, 16)), storage.storage_for(str(tmp_path), policy), read=MissingOrFlaky(tmp_path, failures=0),
        decode_threads=threads)
    kept = tmp_path / 'kept'
    result['images'] | 'Sources' >> beam.Map(lambda images: repr([image.ref.source for image in images])) | (
        'KeepImages' >> beam.Map(_append, f'{kept}.images'))
    result['rejected'] | 'Why' >> beam.Map(lambda r: repr((r.source, r.reason))) | (
        'KeepRejected' >> beam.Map(_append, f'{kept}.rejected'))
    p.run().wait_until_finish()
    assert open(f'{kept}.images').read().splitlines() == [repr([ref.source for ref in photos])]
    assert sorted(open(f'{kept}.rejected').read().splitlines()) == sorted(
        repr(pair) for pair in [('cat/cut.jpg', TRUNCATED), ('cat/notes.jpg', NOT_AN_IMAGE),
                                ('cat/gone.jpg', READ_ERROR)])
