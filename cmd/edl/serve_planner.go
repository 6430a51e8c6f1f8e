package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/planner"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/redis/go-redis/v9"
)

// nomadFlags are `edl serve`'s flags for the Nomad cluster and the planner.
type nomadFlags struct {
	cfg             nomadx.Config
	driver          string
	datacenters     string
	noPlanner       bool
	plannerInterval time.Duration
	plannerCooldown time.Duration
	leaseTTL        time.Duration
	stragglerFactor float64
	stragglerRounds int
	callbackAllow   string
}

func addNomadFlags(fs *flag.FlagSet) *nomadFlags {
	n := &nomadFlags{cfg: nomadx.DefaultConfig()}
	c := &n.cfg
	fs.StringVar(&c.Address, "nomad-addr", c.Address, "Nomad HTTP API address")
	fs.StringVar(&c.Region, "nomad-region", "", "Nomad region (default: the agent's)")
	fs.StringVar(&c.Namespace, "nomad-namespace", c.Namespace, "Nomad namespace of edl's jobs")
	fs.StringVar(&c.Token, "nomad-token", "", "Nomad ACL token (or EDL_NOMAD_TOKEN)")
	fs.StringVar(&c.TLS.CACert, "nomad-ca-cert", "", "PEM CA certificate of the Nomad agent")
	fs.StringVar(&c.TLS.ClientCert, "nomad-client-cert", "", "PEM client certificate for mTLS")
	fs.StringVar(&c.TLS.ClientKey, "nomad-client-key", "", "PEM client key for mTLS")
	fs.StringVar(&c.TLS.ServerName, "nomad-tls-server-name", "", "name to check in the agent's certificate")
	fs.BoolVar(&c.TLS.Insecure, "nomad-tls-skip-verify", false, "do not verify the agent's certificate (testing only)")
	fs.StringVar(&c.JobPrefix, "nomad-job-prefix", c.JobPrefix, "prefix of the Nomad job ID made from an edl job ID")
	fs.StringVar(&n.datacenters, "nomad-datacenters", strings.Join(c.Datacenters, ","), "comma-separated datacenters workers may run in")
	fs.StringVar(&c.NodePool, "nomad-node-pool", "", "Nomad node pool (default: Nomad's)")
	fs.StringVar(&n.driver, "driver", string(c.Driver), "task driver of workers: exec, raw_exec or docker")
	fs.StringVar(&c.Image, "docker-image", "", "worker image for --driver docker")
	fs.StringVar(&c.Command, "worker-command", c.Command, "the edl binary on Nomad clients (exec/raw_exec)")
	fs.IntVar(&c.CPUMHz, "worker-cpu", c.CPUMHz, "CPU MHz per worker task")
	fs.IntVar(&c.MemoryMiB, "worker-memory", c.MemoryMiB, "memory MiB per worker task")
	fs.DurationVar(&c.KillTimeout, "worker-kill-timeout", c.KillTimeout, "SIGTERM to SIGKILL: time for a graceful leave")
	fs.BoolVar(&n.noPlanner, "no-planner", false, "serve the API only (another replica plans)")
	fs.DurationVar(&n.plannerInterval, "planner-interval", 2*time.Second, "planner round interval when nothing happens")
	fs.DurationVar(&n.plannerCooldown, "planner-cooldown", planner.DefaultConfig().Cooldown, "how long after a resize the planner leaves a job's size alone")
	fs.DurationVar(&n.leaseTTL, "planner-lease", 5*time.Second, "planner lease: a stand-by replica takes over within about this long")
	addStragglerFlags(fs, &n.stragglerFactor, &n.stragglerRounds)
	addCallbackFlags(fs, &n.callbackAllow, "")
	return n
}

// plannerOnNomad returns the hook that runs the planner loop against Nomad,
// or nil with --no-planner. redisURL and storeURL go to the workers.
// With acl, each job's workers log in as its per-job ACL user.
func (n *nomadFlags) plannerOnNomad(rdb redis.UniversalClient, prefix, redisURL, storeURL string, acl *loop.WorkerACL, tenants *jobs.Tenants, pm *plannerMetrics, log *slog.Logger) (plannerHook, *nomadx.Cluster, error) {
	c := n.cfg
	c.Driver = nomadx.Driver(n.driver)
	c.Datacenters = nil
	for _, dc := range strings.Split(n.datacenters, ",") {
		if dc = strings.TrimSpace(dc); dc != "" {
			c.Datacenters = append(c.Datacenters, dc)
		}
	}
	c.RedisURL, c.StoreURL = redisURL, storeURL
	if acl != nil {
		c.WorkerRedisAuth = acl.Credentials
	}
	if err := c.Validate(); err != nil {
		return nil, nil, usageErrorf("serve: %s", nomadFlagNames.Replace(err.Error()))
	}
	cluster, err := nomadx.New(c, log)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: nomad: %w", err)
	}
	if n.noPlanner {
		return nil, cluster, nil
	}
	if err := checkStragglerFlags("serve", n.stragglerFactor, n.stragglerRounds); err != nil {
		return nil, nil, err
	}
	lc := loop.DefaultConfig()
	lc.OnDecide = pm.decide
	lc.Interval, lc.LeaseTTL, lc.Prefix = n.plannerInterval, n.leaseTTL, prefix
	lc.Policy.Cooldown = n.plannerCooldown
	host, _ := os.Hostname()
	lc.Holder = host + "-" + strconv.Itoa(os.Getpid())
	lc.Tenants = loop.TenantShares(tenants)
	if acl != nil {
		lc.WorkerAuth = acl
	}
	plannerWorkers(&lc, n.stragglerFactor, n.stragglerRounds, rdb, prefix)
	if lc.Callbacks, err = plannerCallbacks("serve", n.callbackAllow, tenants, log); err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, store *jobstore.Store) error {
		pl, err := loop.New(lc, store, cluster, rdb, log)
		if err != nil {
			return err
		}
		pm.loop.Store(pl)
		if err := startSweeps(ctx, rdb, prefix, sweepstore.New(rdb, sweepstore.Config{Prefix: prefix}), store, pm, log); err != nil { // sweeps.go
			return err
		}
		go cluster.Watch(ctx, 0, pl.Wake) // rounds on Nomad's changes, not only every interval
		return pl.Run(ctx)
	}, cluster, nil
}

// nomadFlagNames names, in nomadx.Config's errors, the flag that sets each
// field: "nomad config: store_url: required" reads "nomad config:
// store_url (--store): required".
var nomadFlagNames = func() *strings.Replacer {
	var pairs []string
	for field, flag := range map[string]string{
		"address": "--nomad-addr", "job_prefix": "--nomad-job-prefix", "datacenters": "--nomad-datacenters",
		"driver": "--driver", "image": "--docker-image", "command": "--worker-command",
		"cpu_mhz": "--worker-cpu", "memory_mib": "--worker-memory", "kill_timeout": "--worker-kill-timeout",
		"redis_url": "--worker-redis", "store_url": "--store", "tls.client_cert": "--nomad-client-cert and --nomad-client-key",
	} {
		pairs = append(pairs, "nomad config: "+field+": ", "nomad config: "+field+" ("+flag+"): ")
	}
	return strings.NewReplacer(pairs...)
}()
