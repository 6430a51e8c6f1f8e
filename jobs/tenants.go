package jobs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// MinCallbackSecretLen is the shortest callback_secret accepted.
const MinCallbackSecretLen = 16

// Default per-tenant request rate when the tenants file gives none.
const (
	DefaultRatePerS = 50
	DefaultBurst    = 100
)

// Tenant is one principal of the API: a team with a GPU quota and a fair-share
// weight, or an admin (who may also read the whole cluster).
type Tenant struct {
	Name string `json:"name" yaml:"name"`
	// TokenSHA256 is the hex SHA-256 of the bearer token; the token itself is
	// never stored.
	TokenSHA256 string `json:"-" yaml:"token_sha256"`
	// GPUQuota caps the GPUs the tenant's jobs hold at once; 0 means no cap.
	GPUQuota int `json:"gpu_quota" yaml:"gpu_quota"`
	// Weight is the tenant's share when GPUs are contended (default 1).
	Weight float64 `json:"weight" yaml:"weight"`
	Admin  bool    `json:"admin" yaml:"admin"`
	// RatePerS and Burst bound API requests (token bucket).
	RatePerS float64 `json:"rate_per_s" yaml:"rate_per_s"`
	Burst    int     `json:"burst" yaml:"burst"`
	// CallbackSecret signs the tenant's completion callbacks (HMAC-SHA256,
	// header X-Edl-Signature; see docs/planner-loop.md); empty: unsigned. Never
	// shown by the API.
	CallbackSecret string `json:"-" yaml:"callback_secret"`
	// Limits bound each job the tenant submits (limits.go); 0 is the
	// global bound.
	MaxWorkers    int   `json:"max_workers,omitempty" yaml:"max_workers"`
	MaxParameters int64 `json:"max_parameters,omitempty" yaml:"max_parameters"`
}

// Tenants is the set of principals, looked up by token or name.
type Tenants struct {
	byHash map[string]Tenant
	byName map[string]Tenant
}

// tenantsFile is the YAML layout:
//
//	tenants:
//	  - name: vision
//	    token_sha256: 5e88...   # sha256 of the bearer token, hex
//	    gpu_quota: 8
//	    weight: 2
//	    rate_per_s: 50          # optional, default 50
//	    burst: 100              # optional, default 100
//	    callback_secret: s3cr... # optional: signs callbacks (>= 16 chars)
//	    max_workers: 16         # optional: workers.max of a job, default 1024
//	    max_parameters: 1000000 # optional: built-in model size, default 67108864
//	admins:
//	  - name: ops
//	    token_sha256: 9f86...
type tenantsFile struct {
	Tenants []Tenant `yaml:"tenants"`
	Admins  []Tenant `yaml:"admins"`
}

// HashToken returns the hex SHA-256 of a bearer token, as the file stores it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseTenants parses the tenants YAML (unknown keys refused).
func ParseTenants(data []byte) (*Tenants, error) {
	var f tenantsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	for i := range f.Admins {
		f.Admins[i].Admin = true
	}
	return NewTenants(append(f.Tenants, f.Admins...)...)
}

// NewTenants checks and indexes tenants, filling defaults (weight 1, rate).
func NewTenants(list ...Tenant) (*Tenants, error) {
	t := &Tenants{byHash: map[string]Tenant{}, byName: map[string]Tenant{}}
	v := &ValidationError{}
	for i, tn := range list {
		field := fmt.Sprintf("tenants[%d]", i)
		tn.TokenSHA256 = strings.ToLower(strings.TrimSpace(tn.TokenSHA256))
		if tn.Weight == 0 {
			tn.Weight = 1
		}
		if tn.RatePerS == 0 {
			tn.RatePerS = DefaultRatePerS
		}
		if tn.Burst == 0 {
			tn.Burst = max(DefaultBurst, int(tn.RatePerS))
		}
		switch {
		case !nameRE.MatchString(tn.Name) || len(tn.Name) > MaxNameLen:
			v.add(field+".name", "must be 1-%d lowercase letters, digits or '-'", MaxNameLen)
		case t.byName[tn.Name].Name != "":
			v.add(field+".name", "duplicate tenant %q", tn.Name)
		}
		if b, err := hex.DecodeString(tn.TokenSHA256); err != nil || len(b) != sha256.Size {
			v.add(field+".token_sha256", "must be 64 hex digits (sha256sum of the token)")
		} else if other, dup := t.byHash[tn.TokenSHA256]; dup {
			v.add(field+".token_sha256", "same token as tenant %q", other.Name)
		}
		if tn.GPUQuota < 0 {
			v.add(field+".gpu_quota", "must be >= 0 (0: no cap)")
		}
		if !(tn.Weight > 0) || math.IsInf(tn.Weight, 0) {
			v.add(field+".weight", "must be a finite number > 0 (absent: 1)")
		}
		if !(tn.RatePerS > 0) || math.IsInf(tn.RatePerS, 0) {
			v.add(field+".rate_per_s", "must be a finite number > 0 (absent: %d)", DefaultRatePerS)
		}
		if tn.Burst < 1 {
			v.add(field+".burst", "must be >= 1 (absent: the larger of %d and rate_per_s)", DefaultBurst)
		}
		if tn.CallbackSecret != "" && len(tn.CallbackSecret) < MinCallbackSecretLen {
			v.add(field+".callback_secret", "must be at least %d characters (or absent: unsigned callbacks)", MinCallbackSecretLen)
		}
		checkLimits(v, field, tn)
		t.byHash[tn.TokenSHA256] = tn
		t.byName[tn.Name] = tn
	}
	if len(list) == 0 {
		v.add("tenants", "at least one tenant or admin is required")
	}
	if err := v.orNil(); err != nil {
		return nil, err
	}
	return t, nil
}

// Authenticate finds the tenant whose token hashes to the stored digest.
// Comparing digests (not tokens) keeps lookup time independent of the token.
func (t *Tenants) Authenticate(token string) (Tenant, bool) {
	if token == "" {
		return Tenant{}, false
	}
	tn, ok := t.byHash[HashToken(token)]
	return tn, ok
}

// Get returns the tenant with that name.
func (t *Tenants) Get(name string) (Tenant, bool) {
	tn, ok := t.byName[name]
	return tn, ok
}

// All returns every tenant and admin, sorted by name.
func (t *Tenants) All() []Tenant {
	out := make([]Tenant, 0, len(t.byName))
	for _, tn := range t.byName {
		out = append(out, tn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DevTokens are the bearer tokens NewDevTenants made, in the shape of
// <data-dir>/tokens.json.
type DevTokens struct {
	Default string `json:"default"`
	Admin   string `json:"admin"`
}

// NewDevTenants makes the single-machine set-up: a tenant "default" (no GPU
// quota) and an admin "admin", each with a fresh random token.
func NewDevTenants() (*Tenants, DevTokens, error) {
	tok := DevTokens{Default: NewToken(), Admin: NewToken()}
	t, err := DevTenants(tok)
	if err != nil {
		return nil, DevTokens{}, err
	}
	return t, tok, nil
}

// DevTenants is the single-machine set-up for tokens made earlier (read
// back from <data-dir>/tokens.json, so scripts keep working across runs).
func DevTenants(tok DevTokens) (*Tenants, error) {
	return NewTenants(
		Tenant{Name: "default", TokenSHA256: HashToken(tok.Default), RatePerS: 500, Burst: 1000},
		Tenant{Name: "admin", TokenSHA256: HashToken(tok.Admin), Admin: true, RatePerS: 500, Burst: 1000},
	)
}

// NewToken returns a random bearer token (32 bytes, hex, "edl_" prefixed).
func NewToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return "edl_" + hex.EncodeToString(b)
}
