"""Flex Template entry point: the launcher VM runs this to submit the build to Dataflow.

It only submits: waiting for the job would hold the launch open until the job ends. Launch parameters
come after the defaults below, so a ``runner`` parameter still wins.
"""
import sys

from imgrec.pipelines import build_dataset

if __name__ == '__main__':
    sys.exit(build_dataset.main(['--runner=DataflowRunner', '--no_wait_until_finish', *sys.argv[1:]]))
