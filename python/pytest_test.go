package python

import (
	"os"
	"os/exec"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
)

const python = "/usr/bin/python3" // Debian's, with python3-torch and python3-pytest

func TestPythonPackage(t *testing.T) {
	if err := exec.Command(python, "-c", "import torch, torch.distributed, pytest").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s with torch and pytest is required under CI: %v", python, err)
		}
		t.Skipf("no %s with torch and pytest: %v", python, err)
	}
	testenv.TrackSources(t, "python/edl", "python/tests", "worker/live/protocol.json") // the result cache must see them
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
