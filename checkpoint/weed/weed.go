package weed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint/s3ready"
)

// Config says where the binary is and where its data lives.
type Config struct {
	Bin string // path to weed; see LookBinary
	Dir string // data directory; kept across Restart
	// AccessKey and SecretKey form the one identity the server accepts
	// (Admin, Read, Write, List, Tagging); anonymous requests are refused.
	AccessKey, SecretKey string
	// StartTimeout bounds the wait until an object can be stored; default 90 s.
	StartTimeout time.Duration
}

// Server is a running (or stopped) weed mini: its Endpoint (the S3
// gateway), Client, Log, Stop, Kill and Restart are s3ready.Child's.
type Server struct {
	*s3ready.Child
}

// LookBinary finds weed: the explicit path when set, then each of dirs
// (e.g. the repository's .tools/bin), then PATH.
func LookBinary(explicit string, dirs ...string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("weed binary %s: %w", explicit, err)
		}
		return explicit, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, "weed")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p, nil
	}
	return "", errors.New("weed (SeaweedFS) not found: set EDL_WEED or run scripts/build-weed.sh")
}

// Start launches weed mini and returns once the S3 gateway stores and
// reads back an object. The child dies with this process (Pdeathsig).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var err error
	if cfg.Bin, cfg.Dir, err = s3ready.PrepareDirs("weed", cfg.Bin, cfg.Dir, "data"); err != nil {
		return nil, err
	}
	identities := map[string]any{"identities": []any{map[string]any{
		"name":        "edl",
		"credentials": []any{map[string]string{"accessKey": cfg.AccessKey, "secretKey": cfg.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}}
	b, _ := json.Marshal(identities)
	s3conf := filepath.Join(cfg.Dir, "s3-identities.json")
	if err := os.WriteFile(s3conf, b, 0o600); err != nil {
		return nil, fmt.Errorf("weed: %w", err)
	}
	ports, err := freePorts(9)
	if err != nil {
		return nil, fmt.Errorf("weed: %w", err)
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"mini",
		"-dir=" + filepath.Join(cfg.Dir, "data"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-s3.port=" + p(0), "-s3.port.grpc=" + p(1),
		"-master.port=" + p(2), "-master.port.grpc=" + p(3),
		"-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-volume.port=" + p(6), "-volume.port.grpc=" + p(7),
		"-admin.port=" + p(8), "-admin.port.legacy=0",
		"-s3.config=" + s3conf,
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false",
		"-webdav=false", "-admin.ui=false", "-master.telemetry=false",
		// Many small test buckets, each its own collection: small volumes
		// and plenty of slots, so no bucket runs out of volumes.
		"-master.volumeSizeLimitMB=64", "-volume.max=400",
	}
	c, err := s3ready.StartChild(ctx, s3ready.ChildConfig{
		Name: "weed mini", Bin: cfg.Bin, Dir: cfg.Dir, Args: args, Endpoint: "127.0.0.1:" + p(0),
		// A clean environment: AWS_* variables of ours would add identities.
		Env:       []string{"HOME=" + cfg.Dir, "PATH=/usr/bin:/bin", "TMPDIR=" + cfg.Dir},
		AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
		// The S3 port answers a few seconds before the filer and volume
		// server can store anything: the probe stores an object.
		Poll: 200 * time.Millisecond, StartTimeout: cfg.StartTimeout,
		// The group's other processes may hold the ports a moment longer
		// than the child lives.
		WaitPortFree: true,
	})
	if err != nil {
		return nil, err
	}
	return &Server{c}, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		// weed derives some gRPC ports as port+10000; stay where that fits.
		if port+10000 > 65535 {
			continue
		}
		out = append(out, port)
	}
	return out, nil
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.AccessKey == "" || c.SecretKey == "":
		return errors.New("weed: AccessKey and SecretKey are required")
	case c.StartTimeout < 0:
		return fmt.Errorf("weed: StartTimeout %s: must not be negative", c.StartTimeout)
	}
	return nil
}
