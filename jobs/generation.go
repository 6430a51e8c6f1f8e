package jobs

// MemberGeneration is a job's current generation as its workers formed it
// (Number 0: none formed yet) and the workers' own records; the API joins
// it with the cluster's view of the workers.
type MemberGeneration struct {
	Number  int64
	Members []string          // worker IDs by rank
	States  map[string]string // worker ID -> preparing, ready, active, leaving
}
