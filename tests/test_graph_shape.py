"""The build graph's size: a small build's start is mostly Beam's set-up of each ParDo (at construction,
at translation and in each bundle processor) and of each fused stage, so the composites this guards
keep the step counts they were cut to. Counts, not times: the graph is built and translated, not run."""
import collections
import dataclasses

import apache_beam as beam
import pytest
from apache_beam.portability import common_urns

from imgrec.pipelines import launcher, preflight, refresh
from imgrec.pipelines.graph import build_pipeline

# The ParDos of each top-level composite of a full build with the defaults, at most.
MOST_PARDOS = {'ListImages': 2, 'ResolveLabels': 3, 'AssignShards': 6, 'Tally': 1}
# NearDuplicates' own, beside FindGroups, its survey of the hashed records and the threshold from it
# (imgrec.transforms.near_duplicate_groups, near_duplicate_candidates.SurveyHashed).
MOST_NEAR_DUPLICATE_PARDOS = 16
MOST_DEAL_SPLITS_PARDOS = 8


@pytest.fixture(scope='module')
def graph(sample_images, tmp_path_factory):
    argv = ['--input', sample_images, '--output', str(tmp_path_factory.mktemp('shape') / 'out'),
            '--image_size', '32']
    config, facts, options = launcher.parse(argv)
    config, latest = preflight.check(config, options, facts.destination)
    facts = dataclasses.replace(facts, previous=latest, refresh=refresh.plan(config, latest))
    pipeline = beam.Pipeline(options=options)
    build_pipeline(pipeline, config, facts)
    return pipeline.to_runner_api().components.transforms


def _pardos(transforms, transform_id, skip=()):
    transform = transforms[transform_id]
    if transform.unique_name.split('/')[-1] in skip:
        return 0
    return (transform.spec.urn == common_urns.primitives.PAR_DO.urn) + sum(
        _pardos(transforms, child, skip) for child in transform.subtransforms)


def _by_name(transforms):
    return {transform.unique_name: transform_id for transform_id, transform in transforms.items()}


def test_top_level_composites_keep_their_step_counts(graph):
    ids = _by_name(graph)
    counts = collections.Counter({name: _pardos(graph, ids[name]) for name in MOST_PARDOS})
    assert {name: count for name, count in counts.items() if count > MOST_PARDOS[name]} == {}


def test_near_duplicates_keeps_its_step_counts(graph):
    ids = _by_name(graph)
    assert _pardos(graph, ids['NearDuplicates'], skip={'FindGroups', 'SurveyHashed', 'ThresholdForCount'}) \
        <= MOST_NEAR_DUPLICATE_PARDOS
    assert _pardos(graph, ids['NearDuplicates/DealSplits']) <= MOST_DEAL_SPLITS_PARDOS


def test_one_combine_sums_the_published_counts(graph):
    names = set(_by_name(graph))
    assert 'Tally' in names and 'CountPerSplit' not in names
