package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestServeFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"serve"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--tenants") {
		t.Errorf("serve without --tenants: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := runMain([]string{"serve", "--tenants", "/nonexistent.yaml"}, &out, &errb); code != 2 {
		t.Errorf("serve with a missing tenants file: exit %d, %q", code, errb.String())
	}
	// Redis down said "worker ACL secret: ...; --worker-redis-acl=false
	// lets workers use ...": a hint to turn the isolation off, for a Redis
	// that was not there. It names Redis and --redis now, and no such hint.
	tf := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(tf, []byte("tenants:\n  - name: a\n    token_sha256: "+jobs.HashToken("x")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	errb.Reset()
	code := runMain([]string{"serve", "--tenants", tf, "--listen", "127.0.0.1:0", "--redis", "redis://" + dead}, &out, &errb)
	if msg := errb.String(); code == 0 || !strings.Contains(msg, "Redis at "+dead+" (--redis)") || strings.Contains(msg, "worker-redis-acl") {
		t.Errorf("serve with Redis down: exit %d, %q", code, msg)
	}
}

func TestServeAPIRunsHookAndStops(t *testing.T) {
	r := testenv.NewRedisServer(t)
	tenants, tok, err := jobs.NewDevTenants()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hookStarted := make(chan *jobstore.Store, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveAPI(ctx, apiSetup{Listener: ln, Redis: r.Client, Prefix: r.Prefix, Tenants: tenants, Logger: log},
			func(ctx context.Context, s *jobstore.Store) error { hookStarted <- s; <-ctx.Done(); return nil })
	}()
	if s := <-hookStarted; s == nil || s.Prefix() != r.Prefix {
		t.Fatalf("planner hook got store %v", s)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/tenants/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Default)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("API not serving: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveAPI did not stop")
	}
	// testenv's redis-server runs with appendonly yes, appendfsync no.
	if !strings.Contains(logs.String(), "appendfsync is no") {
		t.Errorf("no persistence warning in logs:\n%s", logs.String())
	}
}

func TestServeAPIStopsWhenHookFails(t *testing.T) {
	r := testenv.NewRedisServer(t)
	tenants, _, _ := jobs.NewDevTenants()
	boom := errors.New("planner broke")
	err := serveAPI(context.Background(), apiSetup{Listen: "127.0.0.1:0", Redis: r.Client, Prefix: r.Prefix, Tenants: tenants,
		Logger: slog.New(slog.DiscardHandler)}, func(context.Context, *jobstore.Store) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("serveAPI = %v, want the hook's error", err)
	}
}

// nomadx.Config's errors name its fields; serve's name the flag beside
// each, so "store_url: required" says to give --store.
func TestServeNomadErrorsNameTheFlag(t *testing.T) {
	n := addNomadFlags(flag.NewFlagSet("serve", flag.ContinueOnError))
	n.cfg.Address, n.cfg.JobPrefix = "ftp://x", "a/b"
	_, _, err := n.plannerOnNomad(nil, "edl:", "redis://127.0.0.1:6379", "", nil, nil, nil, slog.New(slog.DiscardHandler))
	for _, want := range []string{"address (--nomad-addr)", "job_prefix (--nomad-job-prefix)", "store_url (--store)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want it to name %s", err, want)
		}
	}
}
