"""Grade a class on a SLURM cluster with dask-jobqueue (an example: not run in CI).

    pip install dask-jobqueue          # next to this repository's `make setup` environment
    python deploy/dask/slurm.py SUBMISSIONS_DIR --course-dir my-course --db postgresql+psycopg://... --jobs 16

Run it on a login node (or any host the compute nodes can reach). It asks SLURM for `--jobs` batch
jobs, each one Dask worker with one core, started in this repository's virtual environment (the
workers import this grader: the hidden specs load there, and each learner's cells run in that
worker's sandbox), then grades the class through `grader autograde --scheduler` and lets the
jobs go. The gradebook is written by this process only; the course directory and gradebook need
not be on a shared filesystem, but the repository and its .venv must be where the jobs run (the
same commit: the grader refuses workers whose grading code differs).
"""
import argparse
import subprocess
import sys
from pathlib import Path

from dask_jobqueue import SLURMCluster

REPO = Path(__file__).resolve().parents[2]

parser = argparse.ArgumentParser()
parser.add_argument("submissions")
parser.add_argument("--course-dir", required=True)
parser.add_argument("--db", default=None)
parser.add_argument("--jobs", type=int, default=16, help="SLURM jobs, one single-core Dask worker each")
parser.add_argument("--queue", default=None, help="SLURM partition")
parser.add_argument("--walltime", default="02:00:00")
args = parser.parse_args()

cluster = SLURMCluster(
    queue=args.queue,
    cores=1, processes=1,            # one grading unit at a time per worker (--nthreads 1)
    memory="6GB",                    # the sandbox's 4096 MB per submission, plus torch and the specs
    walltime=args.walltime,
    python=str(REPO / ".venv" / "bin" / "python"),
    job_script_prologue=[f"cd {REPO}", "export OMP_NUM_THREADS=1"],
    worker_extra_args=["--nthreads", "1"],
)
cluster.scale(jobs=args.jobs)
try:
    command = [str(REPO / ".venv" / "bin" / "grader"), "autograde", args.submissions, "--course-dir", args.course_dir,
               "--scheduler", cluster.scheduler_address] + (["--db", args.db] if args.db else [])
    sys.exit(subprocess.call(command))
finally:
    cluster.close()
