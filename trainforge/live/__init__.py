"""Questions about a live job, asked of the cluster: `trainforge status|logs|why|wait JOB`.

kube.py talks to the API server (the official `kubernetes` client and the user's kubeconfig);
gather.py collects one job's objects on any backend; wait.py a pending job's expected start
from its team's live queue; explain.py turns them into what a person reads; cli.py is the
command line.
"""
