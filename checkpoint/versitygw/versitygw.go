package versitygw

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint/s3ready"
	"github.com/edl-nomad/edl/internal/freeport"
)

// Config says where the binary is and where its data lives.
type Config struct {
	Bin string // path to versitygw; see LookBinary
	Dir string // data directory; kept across Restart
	// AccessKey and SecretKey form the root identity, the only one the
	// gateway accepts; anonymous requests are refused.
	AccessKey, SecretKey string
	// StartTimeout bounds the wait until an object can be stored; default 60 s.
	StartTimeout time.Duration
}

// Validate says which field is wrong.
func (c Config) Validate() error {
	switch {
	case c.Bin == "":
		return errors.New("versitygw: Bin is required")
	case c.Dir == "":
		return errors.New("versitygw: Dir is required")
	case c.AccessKey == "" || c.SecretKey == "":
		return errors.New("versitygw: AccessKey and SecretKey are required")
	case c.StartTimeout < 0:
		return fmt.Errorf("versitygw: StartTimeout %s is negative", c.StartTimeout)
	}
	return nil
}

// Server is a running (or stopped) gateway: its Endpoint, Client, Log,
// Stop, Kill and Restart are s3ready.Child's.
type Server struct {
	*s3ready.Child
}

// Start launches the gateway and returns once it stores and reads back an
// object. The child dies with this process (Pdeathsig).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var err error
	if cfg.Bin, cfg.Dir, err = s3ready.PrepareDirs("versitygw", cfg.Bin, cfg.Dir, "data", "meta"); err != nil {
		return nil, err
	}
	data, meta := filepath.Join(cfg.Dir, "data"), filepath.Join(cfg.Dir, "meta")
	port, err := freeport.Loopback()
	if err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(port)
	c, err := s3ready.StartChild(ctx, s3ready.ChildConfig{
		Name: "versitygw", Bin: cfg.Bin, Dir: cfg.Dir, Endpoint: endpoint,
		Args: []string{"--port", endpoint, "--region", "us-east-1", "--quiet", "posix", "--sidecar", meta, data},
		// A clean environment: the root identity comes from these two alone.
		Env: []string{"HOME=" + cfg.Dir, "PATH=/usr/bin:/bin", "TMPDIR=" + cfg.Dir,
			"ROOT_ACCESS_KEY=" + cfg.AccessKey, "ROOT_SECRET_KEY=" + cfg.SecretKey},
		AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
		Poll: 50 * time.Millisecond, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &Server{c}, nil
}
