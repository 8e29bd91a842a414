"""Live progress: lines from a real multi-process build, none with --progress off, and a Dataflow job's
URL and counters from its metrics (only the Dataflow API is faked), read by contract.counters' one rule."""
import io
import json
import os
import re
import subprocess
import sys
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dataflow import dataflow_runner
from apache_beam.runners.dataflow.dataflow_metrics import DataflowMetrics
from apache_beam.runners.runner import PipelineState
from google.cloud.dataflow_v1beta3 import types as dataflow

from imgrec.contract import counters, layout
from imgrec.pipelines import build_dataset, progress, summary
from imgrec.pipelines.local.live_counters import CountingRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r'^build-dataset: \[(?P<stage>\w+)\] \d+ s: listed (?P<listed>\d+), decoded (?P<decoded>\d+), '
                  r'quarantined (?P<quarantined>\d+), written (?P<written>\d+)')


def _build(sample_images, output, *extra):
    return subprocess.run(
        [sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', sample_images, '--output', str(output),
         '--image_size', '32', '--version', 'v1', '--direct_running_mode', 'multi_processing',
         '--direct_num_workers', '2', *extra],
        cwd=ROOT, capture_output=True, text=True, check=True)


def test_a_multi_process_build_prints_progress_lines_with_the_final_counts(sample_images, tmp_path):
    # Starting the worker processes alone takes longer than this interval.
    run = _build(sample_images, tmp_path, '--progress_interval', '0.2')
    lines = run.stderr.splitlines()
    assert lines and all(LINE.match(line) for line in lines), run.stderr
    document = json.loads((tmp_path / 'v1' / layout.DATASET_JSON).read_text())
    final = LINE.match(lines[-1])
    assert final['stage'] == 'done'
    # The counters come from the worker processes: the final line holds the build's own accounting.
    assert int(final['listed']) == document['counts']['inputs']
    assert int(final['decoded']) == int(final['written']) == document['counts']['written']
    assert int(final['quarantined']) == document['counts']['quarantined']
    assert run.stdout.startswith('build-dataset: wrote ')


def test_progress_off_prints_nothing(sample_images, tmp_path):
    run = _build(sample_images, tmp_path, '--progress_interval', '0.2', '--progress', 'off')
    assert run.stderr == ''
    assert run.stdout.startswith('build-dataset: wrote ')


@pytest.mark.parametrize('flags', [['--progress', 'sometimes'], ['--progress_interval', '0']])
def test_a_bad_progress_flag_is_a_one_line_usage_error(sample_images, tmp_path, capsys, flags):
    assert build_dataset.main(['--input', sample_images, '--output', str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(('build-dataset: error: --progress',
                                                          'build-dataset: error: argument --progress')), err


def test_describe_gives_rate_and_eta_once_decoding_started():
    values = {counters.IMAGES_LISTED: 100, counters.IMAGES_DECODED: 30, counters.IMAGES_REJECTED: 10,
              counters.RECORDS_WRITTEN: 0, (counters.QUARANTINE, 'truncated'): 10,
              (counters.QUARANTINE, 'label_conflict'): 2}
    assert progress.describe(values, 12, 'DecodeResize', decoding_seconds=4) == (
        'build-dataset: [DecodeResize] 12 s: listed 100, decoded 30, quarantined 12, written 0; '
        '10.0 images/s, ETA 6 s')
    assert 'ETA' not in progress.describe({counters.IMAGES_LISTED: 100}, 3, counters.LIST_IMAGES)


def test_a_rerun_counts_the_images_it_took_up_apart_and_leaves_them_out_of_the_time_left():
    values = {counters.IMAGES_LISTED: 100, counters.IMAGES_RESUMED: 70, counters.IMAGES_DECODED: 10,
              counters.RECORDS_WRITTEN: 0}
    assert progress.describe(values, 12, 'DecodeResize', decoding_seconds=4) == (
        'build-dataset: [DecodeResize] 12 s: listed 100, resumed 70, decoded 10, quarantined 0, written 0; '
        '2.5 images/s, ETA 8 s')


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_line_updates_in_place(tmp_path):
    class Pipeline:
        runner = CountingRunner()

    tally = Pipeline.runner.tally
    tally.finished({counters.IMAGES_LISTED: 7})
    terminal = _Terminal()
    with progress.Progress(Pipeline(), PipelineOptions([]), True, 0.01, stream=terminal):
        deadline = time.monotonic() + 60
        while terminal.getvalue().count('\r') < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        tally.finished({counters.IMAGES_DECODED: 5, counters.RECORDS_WRITTEN: 5})
    text = terminal.getvalue()
    updates = text.split('\r\x1b[K')
    assert updates[0] == '' and len(updates) >= 3 and text.endswith('\n') and text.count('\n') == 1
    assert LINE.match(updates[1])['listed'] == '7'
    done = LINE.match(updates[-1])
    assert [done[key] for key in ('stage', 'listed', 'decoded', 'written')] == ['done', '7', '5', '5']


class _FakeDataflowApi:
    """The Dataflow API calls a waiting DataflowPipelineResult makes: a job running for a few polls, then done."""

    def __init__(self, running_polls):
        self.running_polls = running_polls
        self.calls = 0

    def get_job(self, job_id):
        self.calls += 1
        state = (dataflow.JobState.JOB_STATE_RUNNING if self.calls <= self.running_polls
                 else dataflow.JobState.JOB_STATE_DONE)
        return dataflow.Job(id=job_id, current_state=state)

    def list_messages(self, job_id, page_token=None, start_time=None, minimum_importance=None):
        return [], None

    # (committed, attempted): a running job's committed values trail its attempted ones.
    VALUES = {counters.IMAGES_LISTED: (40, 50), counters.IMAGES_DECODED: (12, 20), counters.IMAGES_REJECTED: (3, 5),
              (counters.QUARANTINE, 'truncated'): (3, 5), counters.RECORDS_WRITTEN: (0, 0)}

    def get_job_metrics(self, job_id):
        return dataflow.JobMetrics(metrics=[
            dataflow.MetricUpdate(
                name=dataflow.MetricStructuredName(
                    origin='user', name=name, context={'namespace': namespace, 'step': 's2',
                                                       **({'tentative': 'true'} if tentative else {})}),
                scalar=values[tentative])
            for (namespace, name), values in self.VALUES.items() for tentative in (False, True)])


class _FakeRunner:
    def __init__(self, api):
        self.dataflow_client = api


def test_dataflow_job_url_then_counters_from_its_metrics(monkeypatch, tmp_path):
    monkeypatch.setattr(dataflow_runner.time, 'sleep', lambda seconds: None)  # Beam's poll waits 5 s a step
    api = _FakeDataflowApi(running_polls=6)
    options = PipelineOptions(['--project', 'my-project', '--region', 'europe-west4'])
    result = dataflow_runner.DataflowPipelineResult(
        dataflow.Job(id='2026-11-30_01', current_state=dataflow.JobState.JOB_STATE_RUNNING), _FakeRunner(api), options)
    result.metric_results = DataflowMetrics(api, result)

    class Pipeline:
        runner = None

    with open(tmp_path / 'progress.log', 'w') as stream:
        with progress.Progress(Pipeline(), options, True, 0.001, stream=stream) as watch:
            assert watch.wait(result) == PipelineState.DONE
    lines = (tmp_path / 'progress.log').read_text().splitlines()
    assert lines[0] == ('build-dataset: Dataflow job 2026-11-30_01: https://console.cloud.google.com/dataflow/jobs/'
                        'europe-west4/2026-11-30_01?project=my-project')
    shown = [LINE.match(line) for line in lines[1:]]
    assert shown and all(shown), lines
    # Committed values, as the summary would read them: never more than the finished job reports.
    assert [shown[0][key] for key in ('listed', 'decoded', 'quarantined', 'written')] == ['40', '12', '3', '0']


class _Metric:
    def __init__(self, namespace, name, committed, attempted):
        self.key = type('Key', (), {'metric': type('Name', (), {'namespace': namespace, 'name': name})})
        self.committed, self.attempted = committed, attempted


class _Result:
    """A PipelineResult's metrics as a runner reports them: committed values, or None where it has none."""

    def __init__(self, *metrics):
        self._metrics = metrics

    def metrics(self):
        return self

    def query(self, filter=None):  # pylint: disable=redefined-builtin,unused-argument
        return {'counters': list(self._metrics)}


def test_one_rule_committed_where_the_runner_has_it_else_attempted():
    result = _Result(_Metric('decode', 'images_decoded', 7, 9), _Metric('decode', 'images_decoded', None, 4),
                     _Metric('retries', 'read', 0, 3), _Metric('write', 'records_written', None, None))
    values = counters.read(result)
    assert values[counters.IMAGES_DECODED] == 7 + 4  # summed over steps
    assert values[counters.Counter(counters.RETRIES, 'read')] == 0  # committed 0 is a value, not "none"
    assert values[counters.RECORDS_WRITTEN] == 0 and values[counters.UNCHANGED] == 0
    assert dict(counters.read(result, counters.RETRIES)) == {counters.Counter(counters.RETRIES, 'read'): 0}
    assert summary.counter(result, 'images_decoded') == summary.counter(result, counters.IMAGES_DECODED)
