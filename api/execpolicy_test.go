package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
)

func execSpec(image string) jobs.Spec {
	return jobs.Spec{Name: "x", Workers: jobs.WorkerRange{Min: 1, Max: 2},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: []string{"python3", "train.py"}, Image: image}}}
}

func TestExecPolicy(t *testing.T) {
	ml := []string{"registry.internal/ml/*"}
	for _, tc := range []struct {
		name  string
		rules api.ExecRules
		spec  jobs.Spec
		field string // "" = accepted
	}{
		{"local allows", api.ExecRules{Runner: api.RunLocal}, execSpec(""), ""},
		{"builtin is not checked", api.ExecRules{Runner: api.RunDocker}, jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin}}, ""},
		{"docker, allowed image", api.ExecRules{Runner: api.RunDocker, Images: ml}, execSpec("registry.internal/ml/train:1.2"), ""},
		{"docker, digest", api.ExecRules{Runner: api.RunDocker, Images: ml}, execSpec("registry.internal/ml/train@sha256:0123"), ""},
		{"docker, other registry", api.ExecRules{Runner: api.RunDocker, Images: ml}, execSpec("docker.io/evil/miner:latest"), "trainer.exec.image"},
		{"docker, star stays in its segment", api.ExecRules{Runner: api.RunDocker, Images: ml}, execSpec("registry.internal/ml/team/x:1"), "trainer.exec.image"},
		{"docker, prefix trick", api.ExecRules{Runner: api.RunDocker, Images: ml}, execSpec("registry.internal/mlx/train:1"), "trainer.exec.image"},
		{"docker, nothing allowed", api.ExecRules{Runner: api.RunDocker}, execSpec("registry.internal/ml/train:1"), "trainer.exec.image"},
		{"docker, default image allowed", api.ExecRules{Runner: api.RunDocker, Images: ml, DefaultImage: "registry.internal/ml/edl:1"}, execSpec(""), ""},
		{"docker, default image not allowed", api.ExecRules{Runner: api.RunDocker, Images: ml, DefaultImage: "ghcr.io/edl/edl:1"}, execSpec(""), "trainer.exec.image"},
		{"host refused by default", api.ExecRules{Runner: api.RunHost}, execSpec(""), "trainer.kind"},
		{"host allowed", api.ExecRules{Runner: api.RunHost, AllowHost: true}, execSpec(""), ""},
		{"host with an image", api.ExecRules{Runner: api.RunHost, AllowHost: true}, execSpec("registry.internal/ml/x:1"), "trainer.exec.image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := api.NewExecPolicy(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			err = p(tc.spec)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field || ve.Fields[0].Reason == "" {
				t.Fatalf("err %v, want one ValidationError on %s", err, tc.field)
			}
		})
	}
}

func TestExecPolicyRefusesBadRules(t *testing.T) {
	if _, err := api.NewExecPolicy(api.ExecRules{Runner: api.RunDocker, Images: []string{"registry/[ml"}}); err == nil {
		t.Error("malformed pattern accepted")
	}
	if _, err := api.NewExecPolicy(api.ExecRules{Runner: "kubernetes"}); err == nil {
		t.Error("unknown runner accepted")
	}
	if err := api.CheckImagePatterns([]string{" "}); err == nil {
		t.Error("blank pattern accepted")
	}
}

// TestSubmitExecPolicy: the API calls the policy on exec submissions and
// answers 422 naming trainer.exec.image, with every other field at fault.
func TestSubmitExecPolicy(t *testing.T) {
	p, err := api.NewExecPolicy(api.ExecRules{Runner: api.RunDocker, Images: []string{"registry.internal/ml/*"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{ExecPolicy: p})
	body := func(image string, min int) string {
		s := execSpec(image)
		s.Workers.Min = min
		b, _ := json.Marshal(s)
		return string(b)
	}
	fields := func(r reply) map[string]bool {
		out := map[string]bool{}
		if r.code == http.StatusCreated {
			return out
		}
		for _, f := range r.problem(t, http.StatusUnprocessableEntity, api.ProblemValidation).Errors {
			out[f.Field] = true
		}
		return out
	}
	if f := fields(e.submit(tokA, body("docker.io/evil/miner:latest", 1))); !f["trainer.exec.image"] {
		t.Errorf("disallowed image: fields %v, want trainer.exec.image", f)
	}
	if f := fields(e.submit(tokA, body("docker.io/evil/miner:latest", 0))); !f["trainer.exec.image"] || !f["workers.min"] {
		t.Errorf("disallowed image and bad min: fields %v, want both", f)
	}
	if f := fields(e.submit(tokA, body("registry.internal/ml/train:1", 1))); f["trainer.exec.image"] {
		t.Errorf("allowed image refused: fields %v", f)
	}
	// Builtin jobs are not the policy's business.
	if r := e.submit(tokA, exampleJob(t)); r.code != http.StatusCreated {
		t.Errorf("builtin job: %d %s", r.code, r.body)
	}
}
