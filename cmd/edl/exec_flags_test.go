package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/nomadx"
)

func execSpecImage(image string) jobs.Spec {
	return jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: []string{"python3"}, Image: image}}}
}

func refusedField(err error) string {
	var ve *jobs.ValidationError
	if errors.As(err, &ve) && len(ve.Fields) > 0 {
		return ve.Fields[0].Field
	}
	return ""
}

func parseExecFlags(t *testing.T, args ...string) (*serveExecFlags, *nomadFlags, error) {
	t.Helper()
	fs := newFlagSet("serve", "", io.Discard)
	nf := addNomadFlags(fs)
	ef := addServeExecFlags(fs, nf)
	return ef, nf, parseFlags(fs, args)
}

func TestServeExecPolicyFromFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		image  string
		refuse string // field, "" = accepted
	}{
		{"docker, nothing allowed", []string{"--driver", "docker"}, "registry.internal/ml/a:1", "trainer.exec.image"},
		{"docker, allowed", []string{"--driver", "docker", "--exec-images", "registry.internal/ml/*,ghcr.io/org/*"}, "ghcr.io/org/train:2", ""},
		{"docker, repeated flag", []string{"--driver", "docker", "--exec-images", "a/*", "--exec-images", "registry.internal/ml/*"}, "registry.internal/ml/a:1", ""},
		{"docker, not allowed", []string{"--driver", "docker", "--exec-images", "registry.internal/ml/*"}, "docker.io/x/y:1", "trainer.exec.image"},
		{"raw_exec off by default", []string{"--driver", "raw_exec"}, "", "trainer.kind"},
		{"raw_exec allowed", []string{"--driver", "raw_exec", "--allow-raw-exec"}, "", ""},
		{"exec driver needs it too", []string{"--driver", "exec"}, "", "trainer.kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ef, nf, err := parseExecFlags(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ef.policy(nomadx.Driver(nf.driver), nf.cfg.Image)
			if err != nil {
				t.Fatal(err)
			}
			if got := refusedField(p(execSpecImage(tc.image))); got != tc.refuse {
				t.Errorf("refused field %q, want %q", got, tc.refuse)
			}
		})
	}
}

func TestServeExecFlagErrors(t *testing.T) {
	if _, _, err := parseExecFlags(t, "--exec-images", "registry/[ml"); err == nil || !strings.Contains(err.Error(), "exec-images") {
		t.Errorf("bad pattern: %v, want an error naming --exec-images", err)
	}
	_, nf, err := parseExecFlags(t, "--exec-artifact-url", "https://f/edl.tgz", "--exec-artifact-checksum", "sha256:ab", "--exec-binary", "/opt/edl")
	if err != nil {
		t.Fatal(err)
	}
	if x := nf.cfg.Exec; x.ArtifactURL != "https://f/edl.tgz" || x.ArtifactChecksum != "sha256:ab" || x.Binary != "/opt/edl" {
		t.Errorf("nomad exec config %+v", x)
	}
}

func TestServeHelpWarnsAboutRawExec(t *testing.T) {
	var errb bytes.Buffer
	fs := newFlagSet("serve", "", &errb)
	addServeExecFlags(fs, addNomadFlags(fs))
	if err := parseFlags(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	help := errb.String()
	i := strings.Index(help, "-allow-raw-exec")
	if i < 0 || !strings.Contains(help[i:], "WARNING") || !strings.Contains(help, "-exec-images") {
		t.Errorf("help lacks --allow-raw-exec with its warning or --exec-images:\n%s", help)
	}
}

func TestDevAllowsExec(t *testing.T) {
	cfg := devAPIConfig(nil, nil, nil)
	if err := cfg.ExecPolicy(execSpecImage("")); err != nil {
		t.Errorf("edl dev refused an exec job: %v", err)
	}
	if err := cfg.ExecPolicy(execSpecImage("anything:1")); err != nil {
		t.Errorf("edl dev refused an exec job with an image: %v", err)
	}
}
