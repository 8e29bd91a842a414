"""The torture corpus read from and written to Cloud Storage (the gcp-storage-emulator): the same fates,
the same bytes as the local build, and a failed build that leaves the bucket's LATEST alone."""
import json
import os

import pytest

from imgrec.contract import layout
from imgrec.console.errors import build_failure_message
from imgrec.pipelines import launcher
from tests.gcs_emulator import gcs_emulator  # noqa: F401 (fixture)
from tests.torture_fixtures import OPTIONS, check_every_fate, torture_build, torture_corpus  # noqa: F401


@pytest.fixture(scope='session')
def gcs_torture(gcs_emulator, torture_corpus):  # noqa: F811
    """(emulator, bucket url) holding the corpus under images/ and its build, version v1, under out/."""
    bucket = gcs_emulator.create_bucket('issue4-torture')
    gcs_emulator.upload_folder(torture_corpus[0], f'{bucket}/images')
    launcher.run(['--input', f'{bucket}/images', '--output', f'{bucket}/out', *OPTIONS, '--version', 'v1',
                       '--direct_running_mode', 'in_memory'])
    return gcs_emulator, bucket


def test_every_input_meets_its_fate_on_gcs(gcs_torture, torture_corpus, torture_build, tmp_path):  # noqa: F811
    emulator, bucket = gcs_torture
    _, expected, contents = torture_corpus
    assert emulator.read_bytes(f'{bucket}/out/{layout.LATEST}') == b'v1\n'
    local = emulator.download_folder(f'{bucket}/out/v1', tmp_path)
    check_every_fate(local, expected, contents)
    # Same inputs, same bytes, wherever they are read from and written to (the index records where the
    # sources came from: modification times here, generations there).
    built_locally = os.path.join(torture_build[0], 'v1')
    for name in sorted(os.listdir(built_locally)):
        if name in (layout.QUARANTINE_JSONL, layout.DUPLICATES_JSONL):  # lines carry the source's stamp
            assert _without_stamps(os.path.join(built_locally, name)) == _without_stamps(os.path.join(local, name))
            continue
        # These name the run: its time, folders and dataset name (the input folder's by default).
        if name not in (layout.DATASET_JSON, layout.INDEX_DIR, layout.REPORT_HTML, layout.REPORT_STATE_JSON,
                        layout.TFDS_DATASET_INFO):
            with open(os.path.join(built_locally, name), 'rb') as mine, open(os.path.join(local, name), 'rb') as theirs:
                assert mine.read() == theirs.read(), name


def _without_stamps(path):
    lines = [json.loads(line) for line in open(path)]
    return [{key: value for key, value in line.items() if key not in ('mtime_ns', 'ctime_ns', 'inode', 'generation')} for line in lines]


def test_a_failed_build_on_gcs_leaves_latest(gcs_torture):
    emulator, bucket = gcs_torture
    with pytest.raises(Exception) as failed:
        launcher.run(['--input', f'{bucket}/images', '--output', f'{bucket}/out', *OPTIONS,
                           '--max_error_rate', '0.05', '--version', 'v2', '--direct_running_mode', 'in_memory'])
    message = build_failure_message(failed.value)
    assert message and '\n' not in message and 'over --max_error_rate 5.0%' in message
    assert emulator.read_bytes(f'{bucket}/out/{layout.LATEST}') == b'v1\n'
    assert f'{bucket}/out/v2/{layout.DATASET_JSON}' not in emulator.list(f'{bucket}/out/')
