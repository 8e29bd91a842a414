"""The list prices the cost model (``benchmarks.cost_model``) multiplies by: Dataflow's and Cloud Storage's,
in one place, with where and when they were read. Prices change: check them against the sources before
trusting a figure, and change them here only.

Read 2026-12-01, for region us-central1 (Iowa), in USD, on-demand (no committed-use discount, no FlexRS).
This session could not open Google's pricing pages themselves (no web access); the figures below come
from the stored copies of pages and repositories that quote them, named beside each. The Cloud Storage
operation prices are the ones Google's own pricing-examples page uses; the Dataflow ones are as quoted
by third parties from https://cloud.google.com/dataflow/pricing (the page's tables did not come with
the stored copy). **Re-check all of them** at https://cloud.google.com/dataflow/pricing and
https://cloud.google.com/storage/pricing before quoting a cost.
"""
import typing


class Price(typing.NamedTuple):
    usd: float
    unit: str
    source: str


READ_ON = '2026-12-01'
REGION = 'us-central1'

# Dataflow batch workers (not Dataflow Prime), billed per second for what they are given, busy or not.
DATAFLOW_VCPU_HOUR = Price(0.056, 'vCPU-hour', 'quoted from cloud.google.com/dataflow/pricing in '
                           'PolyAI-LDN/conversational-datasets#36 (2019) and a 2024 GitHub price memo (us-east1)')
DATAFLOW_GB_HOUR = Price(0.003557, 'GB-hour of worker memory', 'the same PolyAI-LDN/conversational-datasets#36 (2019)')
DATAFLOW_PD_GB_HOUR = Price(0.000054, 'GB-hour of standard persistent disk',
                            'the same PolyAI-LDN/conversational-datasets#36 (2019)')
# Dataflow Shuffle (the default for batch): per GB of shuffle data processed, after the per-job
# adjustments below. Which bytes count is our reading, not a quote: those written to the shuffle and
# read back from it, each once (``SHUFFLE_PASSES``).
DATAFLOW_SHUFFLE_GB = Price(0.011, 'GB of shuffle data processed (billable)',
                            'a Dataflow cost script on GitHub quoting the pricing page (DATA_GB = 0.011)')
SHUFFLE_PASSES = 2
# Billable shuffle data of one job: the first 250 GB at 25%, the rest of the first 5 TB at 50%, beyond
# that in full (GoogleCloudPlatform/training-data-analyst, courses/dataflow/demos/shuffle_service).
SHUFFLE_ADJUSTMENTS = ((250.0, 0.25), (5 * 1024.0, 0.50), (float('inf'), 1.0))

# A worker's machine: Dataflow's default for batch jobs, n1-standard-1 (1 vCPU, 3.75 GB), and the 25 GB
# boot disk a batch job with Dataflow Shuffle gets (cloud.google.com/dataflow/docs/shuffle-for-batch).
WORKER_VCPUS = 1
WORKER_GB = 3.75
WORKER_DISK_GB = 25

# Cloud Storage, Standard class, per operation (Google's pricing examples: $0.005 and $0.0004 per 1,000;
# cloud.google.com/storage/pricing-examples). Class A: objects.insert (each request of an upload),
# objects.list, objects.rewrite/copy, compose; class B: objects.get (media or metadata); deletes are free
# (the operations-by-class table, as copied in gist zeddee/98dc67bc14cca1dc3da8e1635b8f6088).
STORAGE_CLASS_A = Price(0.005 / 1000, 'class A operation', 'cloud.google.com/storage/pricing-examples')
STORAGE_CLASS_B = Price(0.0004 / 1000, 'class B operation', 'cloud.google.com/storage/pricing-examples')

GIB = 2 ** 30  # Google bills data in binary gigabytes


def billable_shuffle_gb(processed_gb):
    """The billable part of one job's ``processed_gb`` of shuffle data (``SHUFFLE_ADJUSTMENTS``)."""
    billable, floor = 0.0, 0.0
    for ceiling, share in SHUFFLE_ADJUSTMENTS:
        if processed_gb > floor:
            billable += (min(processed_gb, ceiling) - floor) * share
        floor = ceiling
    return billable
