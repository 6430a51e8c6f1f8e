package nomadx

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"
)

// jobPrefixRE is what a Nomad job ID prefix may hold: nothing a URL path
// or Nomad's own ID rules (no spaces, no NUL) would trip on.
var jobPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Driver is the Nomad task driver that runs `edl worker`.
type Driver string

const (
	DriverExec    Driver = "exec"     // isolated fork/exec of Command on the client
	DriverRawExec Driver = "raw_exec" // unisolated; for trusted single-tenant clusters
	DriverDocker  Driver = "docker"   // Image, with Command as the entrypoint
)

// TLS configures HTTPS to the Nomad agent.
type TLS struct {
	CACert     string // PEM file of the CA that signed the agent's certificate
	ClientCert string // PEM file, for mTLS
	ClientKey  string
	ServerName string // overrides the name checked in the agent's certificate
	Insecure   bool   // skip verification; tests only
}

// Retry bounds how Nomad calls are retried.
type Retry struct {
	// Attempts is the total number of tries of one operation (>= 1).
	Attempts int
	// BaseDelay doubles after each failed try, up to MaxDelay; each wait is
	// drawn uniformly from [d/2, d] (jitter).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Timeout bounds one HTTP request; a request that runs past it is
	// retried like a 5xx.
	Timeout time.Duration
}

// Config says which Nomad to talk to and how to run workers there.
type Config struct {
	Address   string // e.g. http://127.0.0.1:4646 or https://nomad.example:4646
	Region    string // empty: the agent's region
	Namespace string // default "default"
	Token     string // ACL token (X-Nomad-Token); empty when ACLs are off
	TLS       TLS

	// JobPrefix makes the Nomad job ID from the edl job ID: "edl-" + id.
	JobPrefix   string
	Datacenters []string // default ["dc1"]
	NodePool    string   // empty: Nomad's default pool

	Driver  Driver
	Image   string // docker only
	Command string // the edl binary for exec/raw_exec (default "edl"); docker: entrypoint, default none (the image's)
	// WorkerEnv is added to the task's environment (e.g. EDL_LOG_LEVEL).
	WorkerEnv map[string]string
	// Exec is how exec-mode tasks get the edl binary (template_exec.go).
	Exec ExecConfig

	CPUMHz    int // task resources.cpu
	MemoryMiB int // task resources.memory

	// KillTimeout is how long Nomad waits after SIGTERM before SIGKILL: long
	// enough for a worker to finish its step and hand back its partition.
	KillTimeout time.Duration

	RedisURL string // passed as `edl worker --redis` (without its password when WorkerRedisAuth is set)
	StoreURL string // passed as `edl worker --store`
	// WorkerRedisAuth, when set, is the Redis login of a job's workers (the
	// planner's per-job ACL user), given to the task as EDL_REDIS_USER and
	// EDL_REDIS_PASSWORD in its environment, never on its command line.
	WorkerRedisAuth func(jobID string) (user, password string)

	Retry Retry

	// ViewMaxAge is how long the cluster read that Capacity makes (nodes,
	// every allocation, edl's jobs: three requests) may answer Workers and
	// Scale's no-op check instead of per-job reads (default 1s: one planner
	// round). Each job's Workers is answered from one read at most once.
	ViewMaxAge time.Duration

	// HTTPClient, when set, is used instead of one built from TLS (tests).
	HTTPClient *http.Client
}

// DefaultConfig is a local dev agent running workers with exec.
func DefaultConfig() Config {
	return Config{
		Address:     "http://127.0.0.1:4646",
		Namespace:   "default",
		JobPrefix:   "edl-",
		Datacenters: []string{"dc1"},
		Driver:      DriverExec,
		Command:     "edl",
		CPUMHz:      1000,
		MemoryMiB:   2048,
		KillTimeout: 30 * time.Second,
		ViewMaxAge:  time.Second,
		Retry: Retry{
			Attempts:  5,
			BaseDelay: 200 * time.Millisecond,
			MaxDelay:  5 * time.Second,
			Timeout:   15 * time.Second,
		},
	}
}

// Validate reports the first invalid field by name.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("nomad config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if u, err := url.Parse(c.Address); c.Address == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix") || (u.Scheme != "unix" && u.Host == "") {
		bad("address", "%q: want the agent's http://HOST:PORT, https://HOST:PORT or unix:///PATH", c.Address)
	}
	if c.JobPrefix == "" || !jobPrefixRE.MatchString(c.JobPrefix) {
		bad("job_prefix", "%q: want 1-64 letters, digits, '.', '_' or '-' (Nomad job IDs are <prefix><edl job id>, and go into API paths)", c.JobPrefix)
	}
	if len(c.Datacenters) == 0 {
		bad("datacenters", "at least one")
	}
	switch c.Driver {
	case DriverExec, DriverRawExec:
		if c.Command == "" {
			bad("command", "required for driver %s", c.Driver)
		}
	case DriverDocker:
		if c.Image == "" {
			bad("image", "required for driver docker")
		}
	default:
		bad("driver", "%q is not exec, raw_exec or docker", c.Driver)
	}
	if c.CPUMHz <= 0 {
		bad("cpu_mhz", "must be > 0")
	}
	if c.MemoryMiB <= 0 {
		bad("memory_mib", "must be > 0")
	}
	if c.KillTimeout <= 0 {
		bad("kill_timeout", "must be > 0")
	}
	if c.RedisURL == "" {
		bad("redis_url", "required (workers coordinate through it)")
	}
	if c.StoreURL == "" {
		bad("store_url", "required (checkpoints)")
	}
	if c.Retry.Attempts < 1 {
		bad("retry.attempts", "must be >= 1")
	}
	if c.Retry.BaseDelay <= 0 || c.Retry.MaxDelay < c.Retry.BaseDelay {
		bad("retry.base_delay", "must be > 0 and <= retry.max_delay")
	}
	if c.ViewMaxAge < 0 {
		bad("view_max_age", "must not be negative")
	}
	if c.Retry.Timeout <= 0 {
		bad("retry.timeout", "must be > 0")
	}
	if err := c.Exec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if (c.TLS.ClientCert == "") != (c.TLS.ClientKey == "") {
		bad("tls.client_cert", "client_cert and client_key go together")
	}
	return errors.Join(errs...)
}
