"""``Output``: an output folder and its storage as one object, whose methods are the publication protocol's steps
on it. Local storage and the gs:// emulator: the same answers through the same object."""
import os

import pytest

from imgrec.contract import layout
from imgrec.storage import storage
from imgrec.storage.latest import Latest
from imgrec.storage.output import Output
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (a fixture)


def _publish(output, version):
    """A version folder as publication leaves it: its files, dataset.json last (what makes it published)."""
    output.storage.write(layout.join(output.version_dir(version), layout.LABELS_TXT), b'a\n')
    output.storage.write(layout.join(output.version_dir(version), layout.DATASET_JSON), b'{}')


def _check(output):
    assert output.latest() == Latest()
    for version in ('v1', 'v2', 'v3'):
        _publish(output, version)
        output.replace_latest(version, output.latest())
    assert output.latest().version == 'v3'
    assert [version for _, version in output.versions()] == ['v1', 'v2', 'v3']
    with pytest.raises(Exception, match='changed during the build'):
        output.replace_latest('v1', Latest())  # LATEST is no longer what this build started from
    staging = output.staging('v4', 'abc123')
    assert staging == layout.join(output.root, layout.staging_name('v4', 'abc123'))
    with output.lease(staging):
        output.storage.write(layout.join(staging, 'part'), b'x')
        assert output.tidy().staging_removed == 0  # a live lease keeps its staging folder
    retention = output.keep_newest(2)
    assert retention.deleted == ('v1',)
    assert [version for _, version in output.versions()] == ['v2', 'v3']


def test_an_output_runs_the_protocol_on_its_folder(tmp_path):
    root = str(tmp_path / 'out')
    os.makedirs(root)
    _check(Output(root, storage.storage_for(root)))


def test_an_output_on_gcs_runs_the_same_protocol(gcs_emulator):  # noqa: F811
    root = f"{gcs_emulator.create_bucket('output-object')}/out"
    _check(Output(root, storage.storage_for(root)))
