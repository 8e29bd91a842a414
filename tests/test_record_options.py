"""The typed options of the build: RecordOptions round-trips through dataset.json and decides a refresh's
reuse option by option; BuildConfig holds the user's options only, the facts of a run live in RunFacts."""
import dataclasses
import datetime
import json

import pytest

from imgrec.contract import layout
from imgrec.imaging import record_options
from imgrec.imaging.record_options import RecordOptions
from imgrec.pipelines import launcher, options, refresh
from imgrec.pipelines.config import RunFacts
from imgrec.storage.latest import read_latest
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import load_version

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
# Options in the 'options' object of dataset.json (every option but those that say how a build runs)...
RECORDED = {'output', 'version', 'input', 'manifest', 'image_size', 'resize', 'jpeg_quality', 'max_pixels',
            'min_size', 'splits', 'target_shard_mb', 'num_shards', 'labels', 'labels_file', 'max_error_rate',
            'name', 'allow_unknown_labels'}
# ... and those it leaves out.
RUN_OPTIONS = {'full', 'force', 'keep_versions', 'clean', 'verbose', 'retry_deadline', 'progress', 'progress_interval'}


def test_record_options_round_trip_through_their_dataset_json_form():
    chosen = RecordOptions((24, 32), resize='pad', jpeg_quality=80, max_pixels=5000, min_size=3)
    recorded = json.loads(json.dumps(chosen.recorded()))
    assert recorded == {'image_size': [24, 32], 'resize': 'pad', 'jpeg_quality': 80, 'max_pixels': 5000,
                        'min_size': 3, 'encoder': recorded['encoder']} and recorded['encoder']
    assert RecordOptions.from_recorded(recorded) == chosen
    assert record_options.NAMES == ('image_size', 'resize', 'jpeg_quality', 'max_pixels', 'min_size')


def test_the_parser_makes_one_record_options_from_the_five_options():
    config, _ = options.parse_args(['--input', 'in', '--output', 'out', '--image_size', '24x32', '--resize', 'pad',
                                    '--jpeg_quality', '80', '--max_pixels', '5000', '--min_size', '3'])
    assert config.record_options == RecordOptions((24, 32), 'pad', 80, 5000, 3)
    assert options.parse_args(['--input', 'in', '--output', 'out'])[0].record_options == RecordOptions((192, 192))


def _argv(images, output, *extra, version='v2'):
    return ['--input', str(images), '--output', str(output), '--image_size', '32', '--version', version,
            '--splits', 'train=80,validation=20', *extra]


@pytest.fixture(scope='module')
def published(tmp_path_factory):
    """A published v1 of a small corpus: (images, output)."""
    root = tmp_path_factory.mktemp('record_options')
    images, output = root / 'images', root / 'out'
    write_images(str(images), 3, png_every=2, **SMALL)
    launcher.run(_argv(images, output, '--direct_running_mode', 'in_memory', '--progress', 'off', version='v1'))
    return images, output


def test_the_published_record_options_are_the_configs(published):
    images, output = published
    config, _ = options.parse_args(_argv(images, output))
    _, document = load_version(str(output))
    assert document['record_options'] == json.loads(json.dumps(config.record_options.recorded()))
    assert RecordOptions.from_recorded(document['record_options']) == config.record_options


@pytest.mark.parametrize('option, value, shown', [
    ('--image_size', '24', '32x32 -> 24x24'), ('--resize', 'pad', 'crop -> pad'),
    ('--jpeg_quality', '80', '90 -> 80'), ('--max_pixels', '5000000', '100000000 -> 5000000'),
    ('--min_size', '2', '1 -> 2')])
def test_a_changed_record_option_means_a_full_build_naming_it(published, option, value, shown):
    images, output = published
    config, _ = options.parse_args(_argv(images, output, option, value))
    plan = refresh.plan(config, read_latest(str(output)))
    assert not plan.incremental and not plan.same_options
    assert plan.full_reason == f'{option} changed since version v1 ({shown})'


def test_unchanged_record_options_reuse_the_previous_records(published):
    images, output = published
    config, _ = options.parse_args(_argv(images, output))
    plan = refresh.plan(config, read_latest(str(output)))
    assert plan.incremental and plan.same_options and plan.full_reason is None
    assert plan.reuse_dir == layout.join(str(output), 'v1')
    # Options that only say how the build runs change neither decision.
    config, _ = options.parse_args(_argv(images, output, '--verbose', '--retry_deadline', '5', '--progress', 'off',
                                         '--keep_versions', '2', '--clean', '--force'))
    plan = refresh.plan(config, read_latest(str(output)))
    assert plan.incremental and plan.same_options


def test_build_config_holds_no_run_facts():
    argv = ['--input', 'in', '--output', 'out', '--labels', 'labels.txt']
    first, _ = options.parse_args(argv, now=NOW)
    assert first == options.parse_args(argv, now=NOW)[0]  # no build id, no clock, nothing LATEST said
    assert first.version == '20260102T030405Z'
    config_fields = {field.name for field in dataclasses.fields(options.BuildConfig)}
    fact_fields = {field.name for field in dataclasses.fields(RunFacts)}
    assert not config_fields & fact_fields and {'created', 'build_id', 'previous', 'refresh'} <= fact_fields
    recorded = set(first.describe())
    assert RECORDED <= recorded and not recorded & (RUN_OPTIONS | fact_fields)
    assert RUN_OPTIONS <= config_fields


def test_run_facts_name_the_run():
    built, _ = options.parse_args(['--input', 'in', '--output', 'out', '--version', 'v7'], now=NOW)
    facts, other = RunFacts.start(NOW), RunFacts.start(NOW)
    assert facts.created == '2026-01-02T03:04:05Z' and facts.build_id != other.build_id
    assert facts.staging_dir(built) == layout.join('out', layout.staging_name('v7', facts.build_id))
    assert facts.staging_dir(built) != other.staging_dir(built)
