package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/local"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// imageList is --exec-images: comma-separated, and the flag may repeat.
type imageList []string

func (l *imageList) String() string { return strings.Join(*l, ",") }

func (l *imageList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return api.CheckImagePatterns(*l)
}

// serveExecFlags are `edl serve`'s exec-mode safety flags; the artifact flags
// write into the Nomad config.
type serveExecFlags struct {
	images       imageList
	allowRawExec bool
}

func addServeExecFlags(fs *flag.FlagSet, n *nomadFlags) *serveExecFlags {
	e := &serveExecFlags{}
	fs.Var(&e.images, "exec-images", "glob patterns (comma-separated; '*' stays within one '/' segment) of the images exec jobs may run in with --driver docker, e.g. registry.internal/ml/*; empty: exec jobs are refused on docker (422 naming trainer.exec.image)")
	fs.BoolVar(&e.allowRawExec, "allow-raw-exec", false, "allow exec jobs with --driver raw_exec or exec. WARNING: their programs then run on the Nomad clients themselves, with raw_exec unisolated as the Nomad client's user (often root): any tenant can run any code there. Off: such jobs get 422")
	fs.StringVar(&n.cfg.Exec.ArtifactURL, "exec-artifact-url", "", "archive (.tar.gz, .zip, ...) with the edl binary at its root that Nomad fetches into each exec task (artifact block); empty: the job's image must contain edl at --exec-binary (COPY --from edl's image)")
	fs.StringVar(&n.cfg.Exec.ArtifactChecksum, "exec-artifact-checksum", "", "checksum of --exec-artifact-url, TYPE:HEX (e.g. sha256:...)")
	fs.StringVar(&n.cfg.Exec.Binary, "exec-binary", nomadx.DefaultExecBinary, "path of edl inside exec jobs' images (docker, no artifact)")
	return e
}

// policy is the submit-time exec policy for the Nomad driver in use.
func (e *serveExecFlags) policy(driver nomadx.Driver, defaultImage string) (api.ExecPolicy, error) {
	r := api.ExecRules{Images: e.images, DefaultImage: defaultImage, AllowHost: e.allowRawExec}
	switch driver {
	case nomadx.DriverDocker:
		r.Runner = api.RunDocker
	case nomadx.DriverRawExec, nomadx.DriverExec:
		r.Runner = api.RunHost
	default:
		return nil, usageErrorf("serve: --driver %q: no exec policy for it", driver)
	}
	p, err := api.NewExecPolicy(r)
	if err != nil {
		return nil, usageErrorf("serve: --exec-images: %v", err)
	}
	return p, nil
}

// localExecPolicy is edl dev's: exec jobs run as the user who started it.
func localExecPolicy() api.ExecPolicy {
	p, err := api.NewExecPolicy(api.ExecRules{Runner: api.RunLocal})
	if err != nil {
		panic(fmt.Sprintf("local exec policy: %v", err)) // constant rules
	}
	return p
}

// devAPIConfig is edl dev's API configuration: checkpoints, the local
// cluster's workers and logs, the generation from the workers' keys
// (their default prefix), and exec allowed.
func devAPIConfig(ck api.CheckpointView, cl *local.Cluster, rdb redis.UniversalClient) api.Config {
	return api.Config{Checkpoints: ck, ExecPolicy: localExecPolicy(), Workers: cl, Logs: cl,
		Membership: coord.RedisMembership{Redis: rdb, Prefix: "edl:"}}
}
