"""Runs a sample writer over its jobs, on a process pool or in this process: the images are the same
either way, since every job carries its own seed."""
import multiprocessing


def run(write, jobs, processes=1):
    """``write(job)`` for every job, on ``processes`` worker processes when more than one."""
    if processes > 1:
        with multiprocessing.Pool(processes) as pool:
            pool.map(write, jobs, chunksize=8)
    else:
        for job in jobs:
            write(job)
