# The ACL policy edl's Nomad token needs, and no more.
#
# In "ml", the namespace edl's training jobs run in (--nomad-namespace):
#   list-jobs        GET /v1/jobs?prefix=edl- (one read per planner round)
#   read-job         job, allocation, evaluation and scale-status reads,
#                    blocking queries on them
#   submit-job       register (PUT /v1/jobs) and deregister with purge
#   scale-job        PUT /v1/job/:id/scale (every resize)
#   alloc-lifecycle  PUT /v1/client/allocation/:id/signal (a chosen worker
#                    leaves) and /v1/allocation/:id/stop
#   read-logs        a worker's stdout/stderr for `edl logs`
namespace "ml" {
  capabilities = ["list-jobs", "read-job", "submit-job", "scale-job", "alloc-lifecycle", "read-logs"]
}

# Every namespace, read only: the cluster-wide /v1/allocations read that
# tells which GPUs other teams' jobs hold (node endpoints list GPUs, not
# who uses them).
namespace "*" {
  capabilities = ["read-job"]
}

# Nodes with their resources, drains and eligibility.
node {
  policy = "read"
}
