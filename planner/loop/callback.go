package loop

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/edl-nomad/edl/internal/nonneg"
	"github.com/edl-nomad/edl/jobs"
)

// Callback headers. The signature is Stripe-like:
//
//	X-Edl-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A receiver recomputes the HMAC over the timestamp, a dot and the raw body
// with the tenant's callback_secret, compares it in constant time, and
// refuses timestamps too far from its clock (replays).
const (
	HeaderSignature = "X-Edl-Signature"
	HeaderJob       = "X-Edl-Job"
	HeaderState     = "X-Edl-State"
	// HeaderDelivery names one delivery (job id and version); a receiver
	// dedupes on it (a planner that dies while sending may have the next
	// one send again).
	HeaderDelivery = "X-Edl-Delivery"
)

// CallbackConfig sets up the completion callbacks.
type CallbackConfig struct {
	// Allow lists the networks a callback may reach although they are
	// private, loopback, link-local or otherwise not public
	// (--callback-allow). Empty: public unicast addresses only.
	Allow []netip.Prefix
	// Secret returns a tenant's signing secret; "" sends the callback
	// unsigned (no X-Edl-Signature).
	Secret func(tenant string) string
	// Timeout bounds one try (default 10 s); Attempts the tries (default
	// 5); Backoff the first pause between them, doubling (default 1 s).
	Timeout  time.Duration
	Attempts int
	Backoff  time.Duration
	// Now is the clock of the signature's timestamp (default time.Now).
	Now func() time.Time
}

// ParseAllow parses --callback-allow: comma-separated CIDRs or single
// addresses ("127.0.0.0/8,::1,10.1.2.3").
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("callback allow %q: not a CIDR or an IP address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Callbacks tells a job's callback_url that the job has ended: one POST of
// the job resource as JSON, signed, retried with backoff until a 2xx, a
// refusal (a 3xx, a 4xx other than 408/429, an address not allowed), or
// Attempts tries. It dials only addresses that are public or allowed,
// checked on the address actually dialled (so DNS rebinding gains
// nothing), and follows no redirects.
type Callbacks struct {
	cfg    CallbackConfig
	client *http.Client
	log    *slog.Logger
}

// NewCallbacks returns a notifier.
func NewCallbacks(cfg CallbackConfig, log *slog.Logger) *Callbacks {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Callbacks{cfg: cfg, log: log.With("component", "callback")}
	d := &net.Dialer{Timeout: cfg.Timeout, Control: c.control}
	tr := &http.Transport{
		Proxy:               nil, // a proxy would dial for us, unchecked
		DialContext:         d.DialContext,
		TLSHandshakeTimeout: cfg.Timeout,
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
	}
	c.client = &http.Client{Transport: tr, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c
}

// errBlocked marks a refused address.
var errBlocked = errors.New("address not allowed for callbacks")

// control runs for every connection the client dials, on the resolved
// address it is about to connect to.
func (c *Callbacks) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("callback dial %s: %w", address, errBlocked)
	}
	if !c.Allowed(ap.Addr()) {
		return fmt.Errorf("callback dial %s: %w", ap.Addr(), errBlocked)
	}
	return nil
}

// special are ranges that are not public unicast beyond what netip's
// predicates cover (RFC 6890 and friends).
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: reaches IPv4 behind it
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("2001::/32"),       // Teredo
	netip.MustParsePrefix("100::/64"),        // discard
}

// Allowed reports whether a callback may connect to a: an address in the
// allow list, or a public unicast one. IPv4-mapped IPv6 addresses
// (::ffff:127.0.0.1) are judged as the IPv4 address they map.
func (c *Callbacks) Allowed(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range c.cfg.Allow {
		if p.Contains(a) {
			return true
		}
	}
	if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range special {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Sign returns the X-Edl-Signature value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks an X-Edl-Signature header against body: the HMAC must
// match and the timestamp be within tolerance of now. It is what a
// receiver written in Go would call.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("callback signature: want t=<unix>,v1=<hex>")
	}
	t := time.Unix(sec, 0)
	if d := now.Sub(t); d > tolerance || d < -tolerance {
		return fmt.Errorf("callback signature: timestamp %s is %s from now", t.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	want := Sign(secret, t, body)
	if !hmac.Equal([]byte(want), []byte("t="+ts+",v1="+sig)) {
		return errors.New("callback signature: mismatch")
	}
	return nil
}

// Outcome classes, the only part of a callback's result that goes into the
// tenant-visible job events (never the remote's answer).
const (
	ClassRefused     = "refused"     // the address is not allowed, or the URL is unusable
	ClassUnreachable = "unreachable" // no connection, or no answer in time
)

// Notify posts j to its callback_url; it blocks until done, so call it in a
// goroutine. gate, when set, runs before every try and ends the delivery
// if it fails (the planner lost its lease). It returns the outcome class
// ("2xx", "3xx", "4xx", "5xx", "refused", "unreachable") and an error
// unless it was a 2xx; the error is for the operator's log only.
func (c *Callbacks) Notify(ctx context.Context, j jobs.Job, gate func() error) (string, error) {
	u, err := url.Parse(j.Spec.CallbackURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return ClassRefused, fmt.Errorf("callback of %s: url %q is not an http(s) URL with a host", j.ID, j.Spec.CallbackURL)
	}
	body, err := json.Marshal(j)
	if err != nil {
		return ClassRefused, err
	}
	secret := ""
	if c.cfg.Secret != nil {
		secret = c.cfg.Secret(j.Tenant)
	}
	class := ClassUnreachable
	try := 0
	op := func() (struct{}, error) {
		try++
		if gate != nil {
			if err := gate(); err != nil {
				return struct{}{}, backoff.Permanent(err)
			}
		}
		req, err := c.request(ctx, u, j, body, secret)
		if err != nil {
			class = ClassRefused
			return struct{}{}, backoff.Permanent(err)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			if errors.Is(err, errBlocked) {
				class = ClassRefused
				return struct{}{}, backoff.Permanent(err)
			}
			class = ClassUnreachable
			return struct{}{}, err
		}
		resp.Body.Close()
		class = strconv.Itoa(resp.StatusCode/100) + "xx"
		return struct{}{}, statusErr(resp.StatusCode)
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.RandomizationFactor, b.MaxInterval = c.cfg.Backoff, 2, 0.1, 30*c.cfg.Backoff
	_, err = backoff.Retry(ctx, op, backoff.WithBackOff(b), backoff.WithMaxTries(uint(c.cfg.Attempts)),
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, d time.Duration) {
			c.log.Warn("callback failed; will retry", "job", j.ID, "err", err, "in", d)
		}))
	if err != nil {
		return class, fmt.Errorf("callback of %s to %s: %d tries, last: %w", j.ID, u.Redacted(), try, err)
	}
	return class, nil
}

// request is the callback's POST with its headers, signed when the tenant
// has a secret.
func (c *Callbacks) request(ctx context.Context, u *url.URL, j jobs.Job, body []byte, secret string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "edl-callback/1")
	req.Header.Set(HeaderJob, j.ID)
	req.Header.Set(HeaderState, string(j.State))
	req.Header.Set(HeaderDelivery, j.ID+"."+string(j.State))
	if secret != "" {
		req.Header.Set(HeaderSignature, Sign(secret, c.cfg.Now(), body))
	}
	return req, nil
}

// statusErr: nil for a 2xx, an error to retry for a 5xx, 408 or 429, a
// permanent one otherwise (1xx, 3xx: redirects are not followed, other 4xx).
func statusErr(code int) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		return fmt.Errorf("status %d", code)
	default:
		return backoff.Permanent(fmt.Errorf("refused with status %d", code))
	}
}

// Validate names the field at fault; zero values take the defaults.
func (c CallbackConfig) Validate() error {
	return nonneg.First("callbacks",
		nonneg.Of("Timeout", c.Timeout),
		nonneg.Of("Attempts", c.Attempts),
		nonneg.Of("Backoff", c.Backoff))
}
