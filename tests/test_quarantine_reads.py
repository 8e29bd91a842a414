"""Transient read errors are retried, then fail the build; permanent ones are quarantined as read_error, unretried.

The failures are injected at the read boundary (a reader whose first reads of a path fail, then read
the real file), under the real DecodeResizeEncode DoFn in a TestPipeline.
"""
import hashlib
import os

import apache_beam as beam
import pytest
import requests
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from google.api_core import exceptions as google_errors
from PIL import Image

from imgrec.console.errors import build_failure_message
from imgrec.imaging.record_options import RecordOptions
from imgrec.storage import retries, storage
from imgrec.storage.retries import RetryPolicy, is_transient
from imgrec.transforms.decode import DecodeResizeEncode
from imgrec.transforms.elements import ImageRef


class FlakyReader:
    """Fails the first ``failures`` reads of each path with ``error``, then reads the file.

    Attempts are counted in files under ``log_dir``, so the count survives the DoFn being pickled.
    """

    def __init__(self, log_dir, failures, error=ConnectionResetError):
        self.log_dir, self.failures, self.error = str(log_dir), failures, error

    def attempts(self, path):
        log = os.path.join(self.log_dir, hashlib.sha256(path.encode()).hexdigest())
        return os.path.getsize(log) if os.path.exists(log) else 0

    def __call__(self, path):
        with open(os.path.join(self.log_dir, hashlib.sha256(path.encode()).hexdigest()), 'ab') as log:
            log.write(b'.')
        if self.attempts(path) <= self.failures:
            raise self.error(f'injected failure {self.attempts(path)} reading {path}')
        return storage.storage_for(path).read(path)


@pytest.fixture
def image_ref(tmp_path):
    path = tmp_path / 'cat' / 'a.jpg'
    path.parent.mkdir()
    Image.new('RGB', (40, 30), (200, 30, 30)).save(path, 'JPEG')
    return ImageRef(str(path), 'cat/a.jpg', 'cat', 'train')


def _run(ref, reader, deadline_s):
    """The decode step on one ref, retrying reads for ``deadline_s``; returns (pipeline, written, rejected)."""
    p = TestPipeline()
    policy = RetryPolicy(deadline_s=deadline_s, initial_delay_s=0.01, max_delay_s=0.02)
    result = p | beam.Create([[ref]]) | DecodeResizeEncode(RecordOptions((16, 16)), storage.storage_for(ref.path, policy),
                                                           read=reader)
    written = result['images'] | 'Sources' >> beam.FlatMap(lambda images: [image.ref.source for image in images])
    rejected = result['rejected'] | 'Why' >> beam.Map(lambda r: (r.source, r.reason, r.bytes))
    return p, written, rejected


def _retries(pipeline_result):
    counters = pipeline_result.metrics().query(
        MetricsFilter().with_namespace(retries.NAMESPACE).with_name(retries.READ))['counters']
    return sum(counter.committed for counter in counters)


def test_reads_that_fail_then_succeed_are_retried_and_written(image_ref, tmp_path):
    reader = FlakyReader(tmp_path, failures=2)
    p, written, rejected = _run(image_ref, reader, deadline_s=60)
    assert_that(written, equal_to(['cat/a.jpg']), label='Written')
    assert_that(rejected, equal_to([]), label='Rejected')
    result = p.run()
    result.wait_until_finish()
    assert reader.attempts(image_ref.path) == 3
    assert _retries(result) == 2
    assert retries.summary_line(result) == 'retried 2 operations (2 reads)'


@pytest.mark.parametrize('error', [google_errors.ServiceUnavailable, google_errors.RetryError])
def test_transient_errors_past_the_deadline_fail_the_build_not_quarantine(image_ref, tmp_path, error):
    if error is google_errors.RetryError:  # what Google's clients raise when their own retries give up
        error = lambda message: google_errors.RetryError(message, cause=ConnectionResetError(message))  # noqa: E731
    reader = FlakyReader(tmp_path, failures=10 ** 6, error=error)
    p, written, rejected = _run(image_ref, reader, deadline_s=0.3)
    assert_that(rejected, equal_to([]), label='Rejected')
    with pytest.raises(Exception) as failure:
        p.run().wait_until_finish()
    message = build_failure_message(failure.value)
    assert message.startswith(f'cannot read {image_ref.path}: ') and 'injected failure' in message
    assert reader.attempts(image_ref.path) > 2


def test_a_missing_file_is_not_retried(image_ref, tmp_path):
    os.remove(image_ref.path)
    reader = FlakyReader(tmp_path, failures=0)
    p, written, rejected = _run(image_ref, reader, deadline_s=60)
    assert_that(rejected, equal_to([('cat/a.jpg', 'read_error', -1)]))
    p.run().wait_until_finish()
    assert reader.attempts(image_ref.path) == 1


@pytest.mark.parametrize('error, transient', [
    (ConnectionResetError('reset by peer'), True),
    (TimeoutError('timed out'), True),
    (OSError('I/O error'), True),
    (google_errors.ServiceUnavailable('503'), True),
    (google_errors.TooManyRequests('429'), True),
    (google_errors.InternalServerError('500'), True),
    (google_errors.RetryError('gave up', cause=None), True),
    (google_errors.NotFound('404'), False),
    (google_errors.Forbidden('403'), False),
    (FileNotFoundError('gone'), False),
    (PermissionError('no'), False),
    (OSError(28, 'No space left on device'), False),
    (OSError(30, 'Read-only file system'), False),
    (ValueError('a bug, not the storage'), False),
    (requests.ConnectionError('connection refused'), True),
    (requests.exceptions.ChunkedEncodingError('connection broken: IncompleteRead'), True),
    (requests.exceptions.InvalidURL('no host'), False),
])
def test_which_errors_are_worth_a_retry(error, transient):
    assert is_transient(error) is transient
