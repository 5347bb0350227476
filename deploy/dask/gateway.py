"""Grade a class on a Dask Gateway (e.g. the one a JupyterHub on Kubernetes offers): an example, not run in CI.

    pip install dask-gateway
    python deploy/dask/gateway.py SUBMISSIONS_DIR --course-dir my-course --db postgresql+psycopg://... --workers 16

The gateway's worker image must hold this repository at the same commit as this process (the
workers import the grader and its hidden specs; the grader refuses workers whose grading code
differs); with an image option, name it in `cluster_options` below. Run this where the gateway's
scheduler is reachable (a JupyterHub server of the instructor), in this repository's environment.
"""
import argparse

from dask_gateway import Gateway

from grader.classroom.grading.batch import autograde_class

parser = argparse.ArgumentParser()
parser.add_argument("submissions")
parser.add_argument("--course-dir", required=True)
parser.add_argument("--db", default=None)
parser.add_argument("--workers", type=int, default=16)
args = parser.parse_args()

gateway = Gateway()  # address and auth from the Hub's dask-gateway config
options = gateway.cluster_options()
# options.image = "registry.example.edu/course/grader:COMMIT"   # where the gateway exposes it
cluster = gateway.new_cluster(options)
cluster.scale(args.workers)
try:
    # A gateway's scheduler speaks TLS with the gateway's credentials: pass its client, not an address.
    print(autograde_class(args.submissions, args.course_dir, db_url=args.db, scheduler=cluster.get_client()))
finally:
    cluster.shutdown()
