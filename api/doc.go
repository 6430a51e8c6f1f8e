// Package api is edl's HTTP interface (echo v4): the /v1 jobs resources,
// tenant authentication and rate limits, problem+json error mapping, health,
// Prometheus metrics and the OpenAPI document and UI. Its handlers carry the
// swag annotations from which openapi/ is generated (make openapi).
//
// It owns no state of its own beyond rate-limit buckets, the per-tenant
// count of open event streams and the one jobstore.Follower (and, for sweeps,
// sweepstore.Follower) their wake-ups come from: jobs live in jobstore.Store. It must not schedule, place or talk to Nomad; the planner
// reacts to what the store records (and to Store.Subscribe wake-ups).
package api
