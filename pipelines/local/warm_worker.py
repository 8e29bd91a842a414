"""A local Beam worker process started before the job's graph exists, so its imports overlap with it.

``imgrec.pipelines.local.workers`` starts one per worker when a local build begins (feature warm-workers).
Each imports Beam's worker harness and this project's transforms (a second or more of CPU), then waits
on stdin for the environment Beam would have started it with (the runner's addresses, the options) and
runs Beam's own harness with it. End of input without an environment means the build no longer needs
it: it exits.
"""
import json
import os
import sys

from apache_beam.runners.worker import sdk_worker_main

# The graph's modules, and so every module its DoFns live in: unpickling them later is then free.
import imgrec.pipelines.graph  # noqa: F401  pylint: disable=unused-import


def main():
    handed = sys.stdin.readline()
    if not handed:
        return 0
    os.environ.update(json.loads(handed))
    sdk_worker_main.main(sys.argv)
    # The harness is done and has closed what it wrote: skip tearing the interpreter down (a third of a
    # second of freeing modules and joining gRPC's threads, which the runner would wait for).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access


if __name__ == '__main__':
    sys.exit(main())
