"""The build job's counters, the steps that count them, and the one rule for reading a counter's value.

The transforms count under these names; the summary, the progress lines, the retry line and the
benchmarks read them back with ``read``. Dataflow shows them by the same names in its console, so they
are as stable as the files the build writes. No Beam import: ``read`` is handed the PipelineResult.

The rule: a counter's value is its **committed** value where the runner reports one, else its
**attempted** value. Committed values count each bundle once even when a runner retried a failed
bundle or ran a speculative copy of it; attempted values count every try. Beam's local FnApiRunner
reports the two as one number; Dataflow reports both, committed trailing attempted by the bundles not
yet committed while the job runs. So the counts a running job's progress shows never exceed what the
finished job reports, and a runner with no committed values (``None``) is still read.
"""
import collections
import typing


class Counter(typing.NamedTuple):
    """A counter's (namespace, name), as the transforms create it with ``Metrics.counter(*COUNTER)``."""
    namespace: str
    name: str

    def __str__(self):
        return f'{self.namespace}/{self.name}'


# Listing the input.
IMAGES_LISTED = Counter('listing', 'images_listed')
FILES_IGNORED = Counter('listing', 'files_ignored')
BAD_MANIFEST_LINES = Counter('listing', 'bad_manifest_lines')
# Reusing the previous version's records (a refresh).
IMAGES_REUSED = Counter('refresh', 'images_reused')
IMAGES_TO_DECODE = Counter('refresh', 'images_to_decode')
REUSE_DAMAGED = Counter('refresh', 'reuse_damaged')  # copied frames found damaged, decoded again (WriteShards)
FACTS_DAMAGED = Counter('refresh', 'facts_damaged')  # index rows whose copied facts did not check: decoded again
# Taking up a stopped run's spilled records (a rerun of the same build).
IMAGES_RESUMED = Counter('resume', 'images_resumed')
# Decoding and encoding. Each decision an image's encoding took is also counted as DECODE/<decision>.
DECODE = 'decode'
IMAGES_DECODED = Counter(DECODE, 'images_decoded')
IMAGES_REJECTED = Counter(DECODE, 'images_rejected')
BYTES_READ = Counter(DECODE, 'bytes_read')
SOURCE_BYTES = Counter(DECODE, 'source_bytes')  # a distribution, not a counter
EXAMPLES_BUILT = Counter('examples', 'examples_built')
EXAMPLE_BYTES = Counter('examples', 'example_bytes')
RECORD_REF_BYTES = Counter('shuffle', 'record_ref_bytes')
# Duplicates, shards, writing and publishing.
DUPLICATES = Counter('dedupe', 'duplicates')
LABEL_CONFLICTS = Counter('dedupe', 'label_conflicts')
RECORDS_ASSIGNED = Counter('sharding', 'records_assigned')
SHARDS_WRITTEN = Counter('write', 'shards_written')
RECORDS_WRITTEN = Counter('write', 'records_written')
BYTES_WRITTEN = Counter('write', 'bytes_written')
UNCHANGED = Counter('publish', 'unchanged')
# Near-duplicate groups (imgrec.transforms.near_duplicates) and stratified splits (imgrec.transforms.splits).
IMAGES_GROUPED = Counter('near_duplicates', 'images_grouped')
IMAGES_MOVED = Counter('near_duplicates', 'images_moved')
HASHES_COMPARED = Counter('near_duplicates', 'hashes_compared')  # pairs of hashes compared in band buckets
IMAGES_DEALT = Counter('splits', 'images_dealt_from_hash_split')  # images whose final split is not split_for's
PAIRS_CONFIRMED = Counter('near_duplicates', 'pairs_confirmed')  # hash candidates the pixel check confirmed
PAIRS_REFUSED = Counter('near_duplicates', 'pairs_refused')  # hash candidates the pixel check refused
# One counter a reason (imgrec.contract.reasons): QUARANTINE/<reason>.
QUARANTINE = 'quarantine'
# One counter a kind of operation retried (imgrec.storage.retries): RETRIES/<kind>.
RETRIES = 'retries'
# Requests made of Cloud Storage, counted where imgrec.storage sends them (imgrec.storage.request_counts),
# one counter a kind: what Cloud Storage bills by operation class. Each attempt is a request.
STORAGE_REQUESTS = 'storage_requests'
OBJECT_READS = Counter(STORAGE_REQUESTS, 'object_reads')      # a whole object's bytes (class B)
RANGED_READS = Counter(STORAGE_REQUESTS, 'ranged_reads')      # a byte range of an object (class B)
METADATA_READS = Counter(STORAGE_REQUESTS, 'metadata_reads')  # an object's size and generation (class B)
WRITES = Counter(STORAGE_REQUESTS, 'writes')                  # each request of an upload (class A)
LISTS = Counter(STORAGE_REQUESTS, 'lists')                    # each page of a listing (class A)
COPIES = Counter(STORAGE_REQUESTS, 'copies')                  # each rewrite call of a copy (class A)
DELETES = Counter(STORAGE_REQUESTS, 'deletes')                # free
REQUEST_KINDS = (OBJECT_READS, RANGED_READS, METADATA_READS, WRITES, LISTS, COPIES, DELETES)
# Bytes those requests moved: downloaded (object and ranged reads), uploaded (writes). Copies move none.
STORAGE_BYTES = 'storage_bytes'
BYTES_DOWNLOADED = Counter(STORAGE_BYTES, 'downloaded')
BYTES_UPLOADED = Counter(STORAGE_BYTES, 'uploaded')
# What enters each shuffle, as the cost model measures it (benchmarks.cost_model taps each GroupByKey's
# input): SHUFFLED_BYTES/<the GroupByKey's full label> and SHUFFLED_ELEMENTS/<the same>.
SHUFFLED_BYTES = 'shuffled_bytes'
SHUFFLED_ELEMENTS = 'shuffled_elements'

# The build's top-level steps (the graph's labels) that do the work, in pipeline order. A progress line
# names a fused stage by the first of these it runs.
LIST_IMAGES = 'ListImages'
MATCH_PREVIOUS = 'MatchPrevious'
ENCODE = 'Encode'
DEDUPE = 'Dedupe'
NEAR_DUPLICATES = 'NearDuplicates'
ASSIGN_SHARDS = 'AssignShards'
WRITE_SHARDS = 'WriteShards'
WRITE_INDEX = 'WriteIndex'
PUBLISH = 'Publish'
STEPS = (LIST_IMAGES, MATCH_PREVIOUS, ENCODE, DEDUPE, NEAR_DUPLICATES, ASSIGN_SHARDS, WRITE_SHARDS, WRITE_INDEX, PUBLISH)


def value(metric_result):
    """One MetricResult's value under the rule above (0 for none)."""
    found = metric_result.committed if metric_result.committed is not None else metric_result.attempted
    return found or 0


def read(pipeline_result, namespace=None):
    """{Counter: value} of a PipelineResult's user counters (of ``namespace`` only, if given), summed over steps.

    A counter never incremented is absent, so reading one gives 0.
    """
    values = collections.Counter()
    for metric_result in pipeline_result.metrics().query()['counters']:
        metric = metric_result.key.metric
        if namespace is None or metric.namespace == namespace:
            values[Counter(metric.namespace, metric.name)] += value(metric_result)
    return values


def by_name(values, name):
    """The sum of ``values`` (as ``read`` gives them) over every counter called ``name``, in any namespace."""
    return sum(count for counter, count in values.items() if counter.name == name)
