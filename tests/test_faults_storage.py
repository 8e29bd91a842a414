"""Whole-file I/O: transient errors are ridden out, permanent ones are not retried and end in one line, and
LATEST never shows a partial value."""
import concurrent.futures
import os

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.console.errors import BuildFailed
from imgrec.storage import latest, retries, storage
from imgrec.storage.byte_ranges import TruncatedRead
from tests.fault_proxy import WRITE, faulty_gcs, gcs_emulator  # noqa: F401  (fixtures)

QUICK = retries.RetryPolicy(deadline_s=30, initial_delay_s=0.01, max_delay_s=0.02)
LOCAL = storage.storage_for('', QUICK)


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes into read-only folders')
def test_a_read_only_folder_fails_at_once_in_one_line(tmp_path):
    folder = tmp_path / 'ro'
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(BuildFailed) as failure:
            LOCAL.write(str(folder / 'v1' / 'dataset.json'), b'{}')
    finally:
        folder.chmod(0o755)
    message = str(failure.value)
    assert message.startswith(f"cannot write {folder / 'v1' / 'dataset.json'}: PermissionError: ")
    assert '\n' not in message and 'still failing' not in message  # permanent: one attempt


def test_an_output_under_a_file_fails_at_once_in_one_line(tmp_path):
    (tmp_path / 'out').write_text('a file, not a folder')
    target = tmp_path / 'out' / 'v1' / 'dataset.json'
    with pytest.raises(BuildFailed) as failure:
        LOCAL.write(str(target), b'{}')
    message = str(failure.value)
    assert message.startswith(f'cannot write {target}: ') and 'Error: ' in message
    assert '\n' not in message and 'still failing' not in message  # permanent: one attempt


def test_transient_errors_are_retried_until_the_deadline():
    attempts = []

    def flaky():
        attempts.append(1)
        raise ConnectionResetError(104, 'Connection reset by peer')

    with pytest.raises(retries.RetriesExhausted) as failure:
        retries.call(flaky, retries.WRITE, 'gs://b/o', retries.RetryPolicy(0.2, 0.01, 0.02))
    assert len(attempts) > 2
    assert str(failure.value).startswith(
        'ConnectionResetError: [Errno 104] Connection reset by peer (still failing after ')


class _RetriedOnPoolThreads(beam.DoFn):
    """Each element: a read on a pool thread whose first attempt fails with a transient error."""

    def process(self, element):
        def read(item):
            attempts = []

            def attempt():
                attempts.append(1)
                if len(attempts) == 1:
                    raise ConnectionResetError(104, 'Connection reset by peer')
                return item

            return retries.call(attempt, retries.READ, f'file {item}', QUICK)

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            yield from retries.counted_map(pool, read, range(element))


def test_retries_on_pool_threads_reach_the_counters():
    """Beam keeps metrics per thread: a retry counted on a pool thread alone would be lost."""
    pipeline = TestPipeline(options=PipelineOptions(['--direct_running_mode', 'in_memory']))
    outputs = pipeline | beam.Create([3, 5]) | beam.ParDo(_RetriedOnPoolThreads())
    assert_that(outputs, equal_to([0, 1, 2, 0, 1, 2, 3, 4]))
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(retries.NAMESPACE))['counters']
    assert sum(c.committed for c in counters if c.key.metric.name == retries.READ) == 8
    assert retries.summary_line(result) == 'retried 8 operations (8 reads)'


def test_a_short_range_is_a_truncated_record_not_a_transient_error(tmp_path):
    from imgrec.storage.frames import FrameReader

    spill = tmp_path / 'spill.tfrecord'
    spill.write_bytes(b'0123456789')
    reader = FrameReader(LOCAL)
    try:
        with pytest.raises(TruncatedRead, match='ends at 10, before byte 14'):
            reader.read([(str(spill), 4, 10)])
    finally:
        reader.close()
    assert not retries.is_transient(TruncatedRead('x'))


def test_gcs_reads_writes_copies_and_deletions_ride_out_faults(faulty_gcs, gcs_emulator):
    bucket = gcs_emulator.create_bucket('storage-faults')
    faulty_gcs.configure(rate=0.5, seed=3, faults=['503', '429', 'reset'])
    gcs = storage.storage_for(bucket, QUICK)
    for n in range(4):
        gcs.write(f'{bucket}/staging/f{n}', b'data %d' % n)
        gcs.copy(f'{bucket}/staging/f{n}', f'{bucket}/v1/f{n}')
        gcs.delete(f'{bucket}/staging/f{n}')
        assert gcs.read(f'{bucket}/v1/f{n}') == b'data %d' % n
    latest.replace_latest(bucket, 'v1', latest.Latest(), gcs)
    faulty_gcs.configure(rate=0)
    assert gcs_emulator.list(bucket) == [f'{bucket}/LATEST'] + [f'{bucket}/v1/f{n}' for n in range(4)]
    assert gcs_emulator.read_bytes(f'{bucket}/LATEST') == b'v1\n'
    assert sum(faulty_gcs.injected.values()) > 5


def test_a_copy_that_keeps_failing_ends_in_one_line(faulty_gcs, gcs_emulator):
    bucket = gcs_emulator.create_bucket('storage-copy-fails')
    gcs_emulator.upload_bytes(f'{bucket}/a', b'a')
    faulty_gcs.configure(rate=1.0, kinds=[WRITE], faults=['503'])
    with pytest.raises(BuildFailed) as failure:
        storage.storage_for(bucket, retries.RetryPolicy(0.3, 0.01, 0.02)).copy(f'{bucket}/a', f'{bucket}/b')
    assert str(failure.value).startswith(f'cannot copy {bucket}/a to {bucket}/b: ServiceUnavailable (HTTP 503): ')
    assert 'still failing after' in str(failure.value) and '\n' not in str(failure.value)


def test_a_shard_too_big_for_one_request_is_uploaded_whole_through_faults(faulty_gcs, gcs_emulator):
    """Over 8 MiB the client uploads in a resumable session; a failed session is started again."""
    bucket = gcs_emulator.create_bucket('storage-big')
    data = bytes(range(256)) * (9 * 4096)  # 9 MiB
    faulty_gcs.configure(rate=0.3, seed=5, kinds=[WRITE], faults=['503', 'reset'])
    storage.storage_for(bucket, QUICK).write(f'{bucket}/v1/train-00000-of-00001.tfrecord', data)
    assert gcs_emulator.read_bytes(f'{bucket}/v1/train-00000-of-00001.tfrecord') == data
    assert faulty_gcs.injected and faulty_gcs.requests[WRITE] > 2
