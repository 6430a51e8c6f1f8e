package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/redis/go-redis/v9"
)

// liveCheckpoints lists the job's checkpoints through the API.
func (d *dev) liveCheckpoints(tenant, id string) []int64 {
	var l struct {
		Checkpoints []struct {
			Step   int64 `json:"step"`
			Shards []struct {
				Name string `json:"name"`
			} `json:"shards"`
		} `json:"checkpoints"`
	}
	if code := d.do(tenant, "GET", "/v1/jobs/"+id+"/checkpoints", nil, &l); code != 200 {
		d.t.Fatalf("list checkpoints: status %d", code)
	}
	var steps []int64
	for _, c := range l.Checkpoints {
		for _, s := range c.Shards {
			if s.Name == "torch-state" {
				steps = append(steps, c.Step)
			}
		}
	}
	return steps
}

// TestLiveKillAllCkpt (a short name: the Unix socket path under the test's
// temporary folder must stay under 108 bytes): a live job under edl dev
// (which has a checkpoint store) checkpoints every 20 steps; both its
// worker processes are SIGKILLed at once (their programs die with them);
// the local cluster starts new ones, whose rank 0 restores the newest
// checkpoint; the job finishes with every sample of every epoch in
// exactly one applied step of the final lineage, and a job event says
// which steps were redone.
func TestLiveKillAllCkpt(t *testing.T) {
	needTorch(t)
	t.Setenv("EDL_DEBUG_SAMPLES", "1")
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	slow := slowSteps(t)
	spec := liveJob("live-ckpt", 2, 2, "--step-sleep", "0.05", "--step-sleep-while", slow)
	spec["checkpoint"] = map[string]any{"every_steps": 20, "keep": 2}
	j := d.submit("alice", spec)
	d.waitLive(j.ID, 120*time.Second, "first steps at world 2", func(s stepLine) bool { return s.wrld == 2 && s.step >= 5 })
	deadline := time.Now().Add(2 * time.Minute)
	for len(d.liveCheckpoints("alice", j.ID)) == 0 || d.get("alice", j.ID).Progress.Step < 45 {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint and 45 steps in 2 minutes (progress %+v)", d.get("alice", j.ID).Progress)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pids := d.waitWorkerPids(2, 30*time.Second)
	at := d.get("alice", j.ID).Progress.Step
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("killed both workers at step %d; checkpoints %v", at, d.liveCheckpoints("alice", j.ID))
	fullSpeed(t, slow) // the restored lineage trains the rest at full speed
	got := d.waitJob("alice", j.ID, 6*time.Minute, "succeeded", func(j jobView) bool { return j.State == "succeeded" || j.State == "failed" })
	if got.State != "succeeded" {
		t.Fatalf("job %s (%s), want succeeded", got.State, got.Reason)
	}
	if want := int64(liveEpochs * liveSamples); got.Progress.Samples != want {
		t.Errorf("progress counts %d samples, want %d", got.Progress.Samples, want)
	}
	opt, err := redis.ParseURL(d.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	recs, err := datapipe.New(rdb, coord.NewKeys("edl:", j.ID), "check").DebugRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	missed, repeated, err := worker.CheckLiveSamples(recs, liveSamples, liveParts, liveEpochs)
	if err != nil {
		t.Fatal(err)
	}
	if missed != 0 || repeated != 0 || len(recs) == 0 {
		t.Errorf("samples missed %d, repeated %d in %d applied steps; want 0, 0", missed, repeated, len(recs))
	}
	found := ""
	for after := ""; ; {
		path := "/v1/jobs/" + j.ID + "/events?limit=500"
		if after != "" {
			path += "&after=" + after
		}
		var p struct {
			Events []struct {
				ID      string `json:"id"`
				Message string `json:"message"`
			} `json:"events"`
		}
		if code := d.do("alice", "GET", path, nil, &p); code != 200 {
			t.Fatalf("events: status %d", code)
		}
		for _, e := range p.Events {
			if strings.Contains(e.Message, "restored the checkpoint of step") {
				found = e.Message
			}
		}
		if len(p.Events) < 500 {
			break
		}
		after = p.Events[len(p.Events)-1].ID
	}
	if !strings.Contains(found, "are redone") {
		t.Errorf("no event saying which checkpoint was restored and which steps are redone (last such event %q)", found)
	}
	t.Logf("%s", found)
}
