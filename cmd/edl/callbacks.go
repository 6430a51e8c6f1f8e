package main

import (
	"flag"
	"log/slog"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner/loop"
)

// devCallbackAllow is edl dev's default --callback-allow: loopback, so a
// receiver on the developer's own machine works out of the box. edl serve
// allows no private address unless told.
const devCallbackAllow = "127.0.0.0/8,::1"

// addCallbackFlags registers --callback-allow.
func addCallbackFlags(fs *flag.FlagSet, allow *string, def string) {
	fs.StringVar(allow, "callback-allow", def, "comma-separated CIDRs that job callbacks may reach although private, loopback or link-local (empty: public addresses only)")
}

// plannerCallbacks builds the callbacks of the planner: the allow list of
// --callback-allow and the tenants' callback_secret.
func plannerCallbacks(cmd, allow string, tenants *jobs.Tenants, log *slog.Logger) (*loop.Callbacks, error) {
	nets, err := loop.ParseAllow(allow)
	if err != nil {
		return nil, usageErrorf("%s: --callback-allow: %v", cmd, err)
	}
	return loop.NewCallbacks(loop.CallbackConfig{Allow: nets, Secret: func(tenant string) string {
		t, _ := tenants.Get(tenant)
		return t.CallbackSecret
	}}, log), nil
}
