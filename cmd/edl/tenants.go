package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edl-nomad/edl/jobs"
)

func init() {
	register(command{
		name:    "tenant-token",
		summary: "make a bearer token for a tenant and print its tenants-file entry",
		run:     runTenantToken,
	})
}

func runTenantToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tenant-token", "Makes a random bearer token, prints it once (give it to the tenant), and prints the\nentry to add to the tenants file, which keeps only the token's SHA-256.", stderr)
	name := fs.String("name", "", "tenant name (lowercase letters, digits, '-')")
	quota := fs.Int("gpu-quota", 0, "GPUs the tenant's jobs may hold at once (0: no cap)")
	weight := fs.Float64("weight", 1, "fair-share weight")
	admin := fs.Bool("admin", false, "an admin (goes under admins:)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	token := jobs.NewToken()
	t := jobs.Tenant{Name: *name, TokenSHA256: jobs.HashToken(token), GPUQuota: *quota, Weight: *weight, Admin: *admin}
	if _, err := jobs.NewTenants(t); err != nil {
		return usageErrorf("tenant-token: %v", err)
	}
	section := "tenants:"
	if *admin {
		section = "admins:"
	}
	fmt.Fprintf(stdout, "# token for %s (shown once): %s\n%s\n  - name: %s\n    token_sha256: %s\n    gpu_quota: %d\n    weight: %g\n",
		t.Name, token, section, t.Name, t.TokenSHA256, t.GPUQuota, t.Weight)
	return nil
}

// loadTenants reads and checks a tenants YAML file (--tenants).
func loadTenants(path string) (*jobs.Tenants, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	t, err := jobs.ParseTenants(data)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return t, nil
}
