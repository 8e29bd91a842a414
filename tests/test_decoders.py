"""Decoding on decode threads of the DoFn's own gives what decoding on its thread gives: the same images, the
same rejections, the same counters and retries (a local in_memory build decodes this way, transforms.decode),
with several batches in a bundle, the last of which leaves from finish_bundle."""
import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from PIL import Image

from imgrec.contract import counters
from imgrec.contract.reasons import NOT_AN_IMAGE, READ_ERROR, TRUNCATED
from imgrec.imaging.record_options import RecordOptions
from imgrec.storage import retries, storage
from imgrec.storage.retries import RetryPolicy
from tests.test_quarantine_reads import FlakyReader
from imgrec.transforms.decode import DecodeResizeEncode
from imgrec.transforms.elements import ImageRef


@pytest.fixture
def refs(tmp_path):
    return _refs(tmp_path)


def _refs(root):
    """Photos, a truncated JPEG, a text file and a missing file, in one class folder."""
    folder = root / 'in' / 'cat'
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


# Decode threads the decode step can run with (0: on its own thread).
INLINE, TWO_THREADS, ONE_THREAD = 0, 2, 1


def _decode(refs, log_dir, decoders):
    """Everything the decode step gives for ``refs`` on ``decoders`` threads, and its counters."""
    log_dir.mkdir()
    p = TestPipeline()
    policy = RetryPolicy(deadline_s=60, initial_delay_s=0.01, max_delay_s=0.02)
    batches = [refs[start:start + 4] for start in range(0, len(refs), 4)]
    result = p | beam.Create(batches) | DecodeResizeEncode(
        RecordOptions((16, 16)), storage.storage_for(str(log_dir), policy), read=MissingOrFlaky(log_dir, failures=1),
        with_hash=True, decoders=decoders)
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


@pytest.fixture(scope='module')
def inline(tmp_path_factory):
    """The decode step on the DoFn's own thread: what every other way must give."""
    return _refs_and_decode(tmp_path_factory.mktemp('inline'), INLINE)


def _refs_and_decode(folder, decoders):
    return _decode(_refs(folder), folder / 'log', decoders)


def test_the_decode_step_on_its_own_thread_rejects_and_retries_what_it_should(inline):
    images, values = inline
    assert len(images['images']) == 12 and all("perceptual_hash='" in image for image in images['images'])
    assert [line.split(',')[:2] for line in images['rejected']] == [
        ["('cat/cut.jpg'", f" '{TRUNCATED}'"], ["('cat/gone.jpg'", f" '{READ_ERROR}'"],
        ["('cat/notes.jpg'", f" '{NOT_AN_IMAGE}'"]]
    assert values[f'{retries.NAMESPACE}/{retries.READ}'] == 14  # every readable file failed once
    assert values[str(counters.IMAGES_DECODED)] == 12


@pytest.mark.parametrize('decoders', [TWO_THREADS, ONE_THREAD])
def test_decoders_give_the_same_images_rejections_and_counters(inline, tmp_path, decoders):
    assert _refs_and_decode(tmp_path, decoders) == inline


@pytest.mark.parametrize('decoders', [INLINE, TWO_THREADS])
def test_bad_files_inside_a_batch_are_quarantined_alone(refs, tmp_path, decoders):
    """A truncated JPEG, a text file and a missing file in the middle of one batch: each is rejected on its
    own, and every photo around them comes out, in the batch's order."""
    photos, bad = refs[:4], refs[12:]
    batch = photos[:2] + bad + photos[2:]
    p = TestPipeline()
    policy = RetryPolicy(deadline_s=60, initial_delay_s=0.01, max_delay_s=0.02)
    result = p | beam.Create([batch]) | DecodeResizeEncode(
        RecordOptions((16, 16)), storage.storage_for(str(tmp_path), policy), read=MissingOrFlaky(tmp_path, failures=0),
        decoders=decoders)
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
