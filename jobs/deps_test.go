package jobs

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainDoesNotLinkRedis keeps the Redis client out of the domain and
// the pure planner: the store lives in jobs/jobstore, and jobs, planner and
// planner/sim (the simulator and its traces) build without go-redis. It
// names each package that imports it, so the failure points at the edge to
// cut.
func TestDomainDoesNotLinkRedis(t *testing.T) {
	const forbidden = "github.com/redis/go-redis"
	pkgs := []string{
		"github.com/edl-nomad/edl/jobs",
		"github.com/edl-nomad/edl/planner",
		"github.com/edl-nomad/edl/planner/sim",
		"github.com/edl-nomad/edl/jobs/sweep",
	}
	for _, pkg := range pkgs {
		t.Run(pkg, func(t *testing.T) {
			// go test puts its own go first on PATH.
			cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
			out, err := cmd.Output()
			if err != nil {
				msg := ""
				if ee, ok := err.(*exec.ExitError); ok {
					msg = string(ee.Stderr)
				}
				t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 2 {
				t.Fatalf("go list -deps %s listed %d packages; want the package and its dependencies", pkg, len(lines))
			}
			for _, line := range lines {
				fields := strings.Fields(line)
				for _, imp := range fields[1:] {
					if strings.HasPrefix(imp, forbidden) && !strings.HasPrefix(fields[0], forbidden) {
						t.Errorf("%s depends on %s: %s imports %s", pkg, forbidden, fields[0], imp)
					}
				}
			}
		})
	}
}
