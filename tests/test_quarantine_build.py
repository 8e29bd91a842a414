"""The torture corpus through the real build job (DirectRunner): every file's fate, the accounting,
the per-reason metrics, determinism, and a clean failure past --max_error_rate that leaves LATEST alone."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from apache_beam.metrics.metric import MetricsFilter

from imgrec.contract import layout
from tests.conftest import listing
from tests.contract_checks import shard_files
from tests.torture_fixtures import OPTIONS, build, check_every_fate, torture_build, torture_corpus  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_input_meets_its_fate(torture_corpus, torture_build):
    _, expected, contents = torture_corpus
    output, _ = torture_build
    assert (open(os.path.join(output, layout.LATEST)).read().strip()) == 'v1'
    check_every_fate(os.path.join(output, 'v1'), expected, contents)


def test_each_quarantine_reason_is_a_beam_metric(torture_build):
    output, result = torture_build
    with open(os.path.join(output, 'v1', layout.DATASET_JSON)) as stream:
        by_reason = json.load(stream)['quarantine']['by_reason']
    counters = result.metrics().query(MetricsFilter().with_namespace('quarantine'))['counters']
    assert {counter.key.metric.name: counter.committed for counter in counters} == by_reason
    duplicates = result.metrics().query(MetricsFilter().with_name('duplicates'))['counters']
    assert sum(counter.committed for counter in duplicates) == 2


def _comparable(version_dir):
    """Every file of a version, with dataset.json less what names the run (time, output folder)."""
    files = {os.path.relpath(os.path.join(folder, name), version_dir): open(os.path.join(folder, name), 'rb').read()
             for folder, _, names in os.walk(version_dir) for name in names}
    # The report and its sidecar show the build's time and folder: their own test is tests/test_report.py.
    del files[layout.REPORT_HTML], files[layout.REPORT_STATE_JSON]
    document = json.loads(files.pop(layout.DATASET_JSON))
    document.pop('created')
    document['options'].pop('output')
    return files, document


def test_two_builds_give_identical_bytes(torture_corpus, torture_build, tmp_path):
    output, _ = torture_build
    build(torture_corpus[0], tmp_path, '--version', 'v1', '--direct_running_mode', 'in_memory')
    first, second = _comparable(os.path.join(output, 'v1')), _comparable(os.path.join(tmp_path, 'v1'))
    assert len(shard_files(os.path.join(tmp_path, 'v1'))) == 3
    assert first[0] == second[0]  # shards, index, quarantine.jsonl, duplicates.jsonl, labels.txt
    assert first[1] == second[1]


def test_too_many_errors_fail_the_build_in_one_line_and_leave_latest(torture_corpus, torture_build, tmp_path):
    output = str(tmp_path / 'out')
    shutil.copytree(torture_build[0], output)
    run = subprocess.run(
        [sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', torture_corpus[0], '--output', output,
         *OPTIONS, '--max_error_rate', '0.05', '--version', 'v2', '--direct_running_mode', 'in_memory'],
        cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1
    assert 'Traceback' not in run.stderr
    # Progress lines ('build-dataset: [step] ...') come every 10 s of a build that takes longer (a loaded machine).
    lines = [line for line in run.stderr.strip().splitlines() if not line.startswith('build-dataset: [')]
    assert len(lines) == 1, run.stderr
    document = json.load(open(os.path.join(output, 'v1', layout.DATASET_JSON)))
    quarantined, inputs = document['counts']['quarantined'], document['counts']['inputs']
    assert lines[0].startswith(f'build-dataset: failed: {quarantined} of {inputs} input images quarantined')
    assert 'over --max_error_rate 5.0%' in lines[0]
    assert 'top reasons: label_conflict (5), unsupported_format (4), truncated (3);' in lines[0]
    assert open(os.path.join(output, layout.LATEST)).read().strip() == 'v1'
    # The failed version stays in its staging folder, where no reader looks.
    (staging,) = [name for name in os.listdir(output) if layout.is_staging_name(name)]
    assert staging.startswith('v2' + layout.STAGING_MARK)
    assert listing(output) == [layout.LATEST, 'v1', staging]
    assert lines[0].endswith(f"see {os.path.join(output, staging, layout.QUARANTINE_JSONL)} "
                             f"(report: {os.path.join(output, staging, layout.REPORT_HTML)})")
    assert not os.path.exists(os.path.join(output, staging, layout.DATASET_JSON))
    # The quarantine list is there to say why, and the failed version can be built again under its name.
    assert os.path.exists(os.path.join(output, staging, layout.QUARANTINE_JSONL))
