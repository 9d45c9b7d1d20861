"""GitOps: environments that follow a branch of a repository, review environments per branch.

- `git`: ask a remote for its branches' commits, export one commit's files (a bare mirror per
  repository in this machine's state folder), the commit a project folder is;
- `locked`: whether a commit's locked dependencies are this worker's;
- `names`: which branches get a review environment, and its name;
- `notes`: a git note per synced commit (refs/notes/stackflow), pushed back to the repository;
- `sync`: what a sync does next, from the branch's commit and the environment's sync record
  (kept with stackflow's records in the team's backend, so every worker decides the same).

The flows that run it are flows/sync.py (`sync/<env>`), flows/review.py (`review/branches`)
and flows/poll.py (`gitops/poll`: one run per interval for every followed environment).
"""
