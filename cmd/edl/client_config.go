package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// clientConfig is the file the client verbs read their server and token
// from when neither a flag nor EDL_SERVER/EDL_TOKEN gives them. `edl dev`
// writes it, so that after `make run` a plain `edl ls` works.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
	// AdminToken is the dev admin's, for the dashboard's cluster page.
	AdminToken string `json:"admin_token,omitempty"`
	// WrittenBy is "edl dev" for a file edl dev may overwrite; a file
	// without it is the user's own and is left alone.
	WrittenBy string `json:"written_by,omitempty"`
}

const devWriter = "edl dev"

// clientConfigPath is $EDL_CONFIG, else $XDG_CONFIG_HOME/edl/config.json,
// else ~/.config/edl/config.json.
func clientConfigPath() (string, error) {
	if p := os.Getenv("EDL_CONFIG"); p != "" {
		return p, nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("client config: no $XDG_CONFIG_HOME and no home directory: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "edl", "config.json"), nil
}

// loadClientConfig reads the client config; a missing file is an empty one.
func loadClientConfig() (clientConfig, string, error) {
	p, err := clientConfigPath()
	if err != nil {
		return clientConfig{}, "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return clientConfig{}, p, nil
	}
	if err != nil {
		return clientConfig{}, p, fmt.Errorf("client config %s: %w", p, err)
	}
	var c clientConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return clientConfig{}, p, fmt.Errorf("client config %s: %w", p, err)
	}
	return c, p, nil
}

// writeDevClientConfig points the client config at a running edl dev, unless
// the file there is the user's own (not written by edl dev). It says on w
// what it did. The file holds a token: mode 0600, its folder 0700.
func writeDevClientConfig(w io.Writer, server, token, adminToken string) error {
	fmt.Fprintf(w, "\nDashboard: %s/ui/#token=%s\n", server, token)
	old, p, err := loadClientConfig()
	if err != nil {
		return err
	}
	if old.Server != "" && old.WrittenBy != devWriter {
		fmt.Fprintf(w, "  client:   %s is your own: left alone (use --server/--token or EDL_SERVER/EDL_TOKEN)\n", p)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	b, _ := json.MarshalIndent(clientConfig{Server: server, Token: token, AdminToken: adminToken, WrittenBy: devWriter}, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // WriteFile keeps an old file's mode
		return fmt.Errorf("client config: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	fmt.Fprintf(w, "\nThe client verbs read %s:\n  edl submit examples/job.json --watch\n  edl ls\n", p)
	return nil
}
