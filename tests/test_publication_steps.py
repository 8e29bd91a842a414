"""Each publication step run twice ends in the state it left the first time, locally and on gs:// (the GCS
emulator), report.html's bytes included; so does the whole publication run again after it finished (a bundle
retried after promotion). And the steps use the output's storage as the job builds it, with the job's options.

The steps run here in this process, on a staging folder made of a real build's version: the accounting and
the metadata steps are the job's DoFns, fed what the job would feed them, and promotion, LATEST and
pruning are ``imgrec.storage.publication``'s.
"""
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys

import apache_beam as beam
import cloudpickle  # Beam's pickler
import pytest

from imgrec.contract import layout
from imgrec.storage import gcs_storage, latest, leases, promotion, publication, retention, storage
from imgrec.storage.output import Output
from imgrec.pipelines import build_dataset, launcher
from imgrec.pipelines.graph import build_pipeline
from imgrec.samples.generate import write_images
from tests.conftest import SMALL, listing
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)
from imgrec.transforms import publish
from imgrec.transforms.elements import LISTED, Tally

BUILD_ID = 'steps0000001'
STAGING = layout.staging_name('v2', BUILD_ID)
OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--splits', 'train=80,validation=20',
           '--num_shards', 'train=2,validation=1')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """A local output with v1 published (LATEST), to copy."""
    images = tmp_path_factory.mktemp('steps') / 'images'
    write_images(str(images), 3, png_every=0, **SMALL)
    output = tmp_path_factory.mktemp('steps-built') / 'out'
    assert build_dataset.main(['--input', str(images), '--output', str(output), *OPTIONS, '--version', 'v1']) == 0
    for views in set(os.listdir(output)) - set(listing(output)):  # TFDS's view, the step after these five
        shutil.rmtree(output / views)
    return output


class Local:
    """An output folder in tmp_path."""

    def __init__(self, built, tmp_path):
        self.output = str(tmp_path / 'out')
        shutil.copytree(built, self.output)
        shutil.copytree(built / 'v1', os.path.join(self.output, STAGING))  # v1's files, to publish as v2
        _without_report(self.output)

    def state(self):
        """{path: sha256} below the output."""
        found = {}
        for directory, _, names in os.walk(self.output):
            for name in names:
                path = os.path.join(directory, name)
                with open(path, 'rb') as stream:
                    data = stream.read()
                found[os.path.relpath(path, self.output)] = hashlib.sha256(data).hexdigest()
        return found


class Remote:
    """A gs:// output on the emulator."""

    count = 0

    def __init__(self, built, emulator):
        Remote.count += 1
        self.emulator = emulator
        self.output = f'{emulator.create_bucket(f"steps-{Remote.count}")}/out'
        emulator.upload_folder(built, self.output)
        emulator.upload_folder(built / 'v1', f'{self.output}/{STAGING}')
        _without_report(self.output)

    def state(self):
        prefix = self.output + '/'
        return {url[len(prefix):]: hashlib.sha256(self.emulator.read_bytes(url)).hexdigest()
                for url in self.emulator.list(prefix)}


def _without_report(output):
    """The staging folder as the metadata step finds it in a build: v1's files, but no report yet (the step
    keeps the build time of a report it finds there, as its own from a run before)."""
    path = layout.join(output, STAGING, layout.REPORT_HTML)
    storage.storage_for(path).delete(path)


@pytest.fixture(params=['local', 'gcs'])
def where(request, built, tmp_path):
    if request.param == 'local':
        return Local(built, tmp_path)
    return Remote(built, request.getfixturevalue('gcs_emulator'))


def _read_json(where, path):
    if isinstance(where, Local):
        with open(os.path.join(where.output, path), encoding='utf-8') as stream:
            return json.load(stream)
    return json.loads(where.emulator.read_bytes(f'{where.output}/{path}'))


def _steps(where):
    """The five steps, each a function of the Publication before it, fed what the job feeds them: the
    shards, index and counts of v1 (copied into the staging folder), published as v2."""
    document = _read_json(where, f'v1/{layout.DATASET_JSON}')
    labels = document['labels']
    shard_stats = []
    for split, entry in document['splits'].items():
        counts = {labels.index(label): n for label, n in entry['class_counts'].items()}
        for i, shard in enumerate(entry['shards']):
            shard_stats.append(dict(shard, split=split, index=i, label_counts=counts if i == 0 else {}))
    tallies = {Tally(LISTED, split): entry['num_examples'] for split, entry in document['splits'].items()}
    describe = {key: document[key] for key in ('name', 'created', 'options', 'record_options', 'label_order')}
    refresh = {'previous': 'v1', 'mode': 'full', 'full_reason': '--full was given'}
    index_parts = [{'file': name, 'rows': document['index']['num_records'] if i == 0 else 0}
                   for i, name in enumerate(document['index']['files'])]
    near_summary = {key: value for key, value in document['near_duplicates'].items() if key != 'file'}
    account = publish._Account(publication.Publication(  # pylint: disable=protected-access
        Output(where.output, storage.storage_for(where.output)), 'v2', layout.join(where.output, STAGING),
        latest.read_latest(where.output), keep_versions=1), max_error_rate=0.05)
    write = publish._WriteMetadata(describe, refresh)  # pylint: disable=protected-access
    return [
        ('account', lambda _: next(account.process(None, shard_stats, tallies, [], [], False))),
        ('write metadata', lambda started: next(write.process(
            started, labels, document['decoding']['decisions'], index_parts,
            {'new': None, 'changed': None, 'removed': None, 'reused': 0}, [], near_summary,
            document['ignored_files']))),
        ('promote', promotion.promote),
        ('move LATEST', promotion.move_latest),
        ('prune', promotion.prune),
    ]


def test_each_step_run_twice_ends_as_it_did_once_and_a_rerun_after_promotion_changes_nothing(where):
    steps = _steps(where)
    leases.Lease(storage.storage_for(where.output), where.output, layout.BUILD_LEASE, STAGING,
                 BUILD_ID).acquire()  # the build's, as its launcher holds it: this process lives
    summary = None
    for name, step in steps:
        once = step(summary)
        after_once = where.state()
        twice = step(summary)
        assert where.state() == after_once, name
        assert dataclasses.replace(twice, retention=None) == dataclasses.replace(once, retention=None), name
        summary = once
    published = where.state()
    assert latest.read_latest(where.output).version == 'v2'
    assert _read_json(where, f'v2/{layout.DATASET_JSON}')['version'] == 'v2'
    assert sorted({path.split('/')[0] for path in published}) == [layout.LATEST, 'v2']
    assert summary.retention == retention.Retention(1, (retention.Kept('v2', 'LATEST'),), ('v1',))
    # A bundle retried after promotion: every step again, from the accounting on, ends where it was.
    again = None
    for _, step in steps:
        again = step(again)
    assert where.state() == published
    assert again.document == summary.document and not again.earlier_run
    assert again.retention == retention.Retention(1, (retention.Kept('v2', 'LATEST'),))


def _account_steps_and_listing(pipeline):
    """The storage the publication's steps start from (the accounting DoFn's Publication) and the listing's."""
    found = {}

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            fn = getattr(node.transform, 'fn', None)
            if isinstance(fn, publish._Account):  # pylint: disable=protected-access
                found['publication'] = fn._start.storage  # pylint: disable=protected-access

        def enter_composite_transform(self, node):
            if node.full_label.endswith('ListImages'):
                found['listing'] = node.transform._storage  # pylint: disable=protected-access
            self.visit_transform(node)

    pipeline.visit(Visitor())
    return found


def test_the_steps_use_the_jobs_storage_with_its_options_as_the_listing_does(tmp_path, monkeypatch):
    """The publication's storage, shipped to a worker as Beam pickles its DoFn, is built from the job's
    options, as the listing's is: unpickled in a fresh process, as on a worker, its client works for the job's
    --project (Application Default Credentials, a file here, name none). No Google API is called.
    (--impersonate_service_account is not among them: Beam removes it from every copy of the options, the
    graph's too, as an option for submission only.)"""
    adc = tmp_path / 'adc.json'
    adc.write_text(json.dumps({'type': 'authorized_user', 'client_id': 'id', 'client_secret': 'secret',
                               'refresh_token': 'token'}))
    monkeypatch.setenv('GOOGLE_APPLICATION_CREDENTIALS', str(adc))
    monkeypatch.delenv(gcs_storage.EMULATOR_HOST, raising=False)
    config, facts, options = launcher.parse([
        '--input', 'gs://photos/in', '--output', 'gs://datasets/out', '--image_size', '32', '--version', 'v2',
        '--project', 'project-1'])
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, config, facts)
    found = _account_steps_and_listing(pipeline)
    projects = []
    for files in (found['publication'], found['listing']):
        (tmp_path / 'storage.pickle').write_bytes(cloudpickle.dumps(files))
        projects.append(subprocess.run(
            [sys.executable, '-c', 'import pickle, sys; print(pickle.load(open(sys.argv[1], "rb")).client.project)',
             str(tmp_path / 'storage.pickle')], check=True, capture_output=True, text=True).stdout.strip())
    assert found['publication'].options_json == found['listing'].options_json
    assert projects == ['project-1', 'project-1']
