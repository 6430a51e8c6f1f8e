package main

// The client verbs (submit, ls, get, watch, scale, cancel, events, logs,
// checkpoints, model) talk to an edl API over HTTP. This file holds what
// they share: the server and token (flags, EDL_SERVER/EDL_TOKEN, the client
// config that `edl dev` writes), the HTTP calls, and problem+json errors.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Exit statuses of the client verbs (documented in the README).
const (
	exitOK        = 0
	exitAPIError  = 1 // the API answered with a problem, or could not be reached
	exitUsage     = 2
	exitJobFailed = 3 // watch: the job failed
	exitCancelled = 4 // watch: the job was cancelled
)

// exitError carries a specific exit status out of a verb.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

// apiError is a non-2xx answer: the problem's fields when the body was
// application/problem+json, the status and body otherwise.
type apiError struct {
	Status int              `json:"status"`
	Type   string           `json:"type"`
	Title  string           `json:"title"`
	Detail string           `json:"detail,omitempty"`
	Errors []apiFieldReason `json:"errors,omitempty"`
	// EarliestFeasible is, for a refused deadline job, the earliest
	// deadline that would be admitted now.
	EarliestFeasible string `json:"earliest_feasible,omitempty"`
	method           string
	path             string
}

type apiFieldReason struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.method, e.path, e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Errors {
		if f.Reason != e.Detail { // a refused deadline's field repeats the detail
			fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Reason)
		}
	}
	if e.EarliestFeasible != "" {
		fmt.Fprintf(&b, "\n  earliest feasible deadline now: %s (\"deadline\" in the spec)", e.EarliestFeasible)
	}
	return b.String()
}

// clientFlags are the flags every client verb has.
type clientFlags struct {
	server, token string
}

func (cf *clientFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&cf.server, "server", "", "edl API URL (default: EDL_SERVER, the client config, else http://127.0.0.1:8080)")
	fs.StringVar(&cf.token, "token", "", "bearer token (default: EDL_TOKEN, else the client config)")
}

// outputFlag is -o table|json of the read verbs.
type outputFlag string

func (o *outputFlag) String() string { return string(*o) }
func (o *outputFlag) Set(v string) error {
	if v != "table" && v != "json" {
		return fmt.Errorf("must be table or json")
	}
	*o = outputFlag(v)
	return nil
}

func addOutputFlag(fs *flag.FlagSet, o *outputFlag) {
	*o = "table"
	fs.Var(o, "o", "output format: table or json")
}

// newVerbFlagSet is newFlagSet with a usage line of the verb's arguments
// and the truth about the environment: only --server and --token have one.
func newVerbFlagSet(name, usage, summary string, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet(name, summary, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\n%s\n\nflags (--server also from EDL_SERVER, --token from EDL_TOKEN):\n", usage, summary)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parseVerb parses a verb's flags, which may come before, between or after
// its positional arguments (`edl get ID -o json`), and checks that exactly
// want positional arguments were given, named in usage. Flags given neither
// way fall back to EDL_SERVER and EDL_TOKEN only: the other flags of a verb
// are per call, not per environment.
func parseVerb(fs *flag.FlagSet, args []string, usage string, want int) ([]string, error) {
	var pos []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return nil, flag.ErrHelp
			}
			return nil, usageErrorf("%s: %v (usage: %s)", fs.Name(), err, usage)
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		rest = rest[1:]
	}
	if len(pos) != want {
		return nil, usageErrorf("%s: want %d argument(s), got %d (usage: %s)", fs.Name(), want, len(pos), usage)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"server", "token"} {
		if set[name] || fs.Lookup(name) == nil {
			continue
		}
		if v, ok := os.LookupEnv(envName(name)); ok && v != "" {
			_ = fs.Set(name, v)
		}
	}
	return pos, nil
}

// client calls one edl API.
type client struct {
	base  *url.URL
	token string
	http  *http.Client // no timeout: streams last; calls bound theirs by ctx
	// display: what the client decodes is printed as text, so its control
	// characters are made visible (shown; client_term.go). Unset for -o
	// json, whose output stays exact.
	display bool
}

// shown cleans v (a pointer to a decoded answer) for the terminal when the
// client decodes for display (client_term.go).
func (c *client) shown(v any) {
	if c.display {
		sanitize(v)
	}
}

// decode unmarshals an answer the client read whole into v, then shown.
func (c *client) decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	c.shown(v)
	return nil
}

// callTimeout bounds every non-streaming call.
const callTimeout = 30 * time.Second

// openVerb parses a verb's flags and its want positional arguments, then
// makes the client that cf (filled by the parse) names.
func openVerb(fs *flag.FlagSet, args []string, usage string, want int, cf *clientFlags) (*client, []string, error) {
	pos, err := parseVerb(fs, args, usage, want)
	if err != nil {
		return nil, nil, err
	}
	c, err := newClient(*cf)
	if err != nil {
		return nil, nil, err
	}
	return c, pos, nil
}

// newClient resolves the server and token: flag, then environment (already
// folded in by parseVerb), then the client config file, then the default.
func newClient(cf clientFlags) (*client, error) {
	server, token := cf.server, cf.token
	if server == "" || token == "" {
		cfg, _, err := loadClientConfig()
		if err != nil {
			return nil, err
		}
		if server == "" {
			server = cfg.Server
		}
		if token == "" && (cf.server == "" || strings.TrimRight(cf.server, "/") == strings.TrimRight(cfg.Server, "/")) {
			// The config's token belongs to the config's server only.
			token = cfg.Token
		}
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--server %q: must be an http:// or https:// URL", server)
	}
	return &client{base: u, token: token, http: &http.Client{CheckRedirect: checkRedirect}}, nil
}

// errRedirect is a redirect the client does not follow.
var errRedirect = errors.New("redirect not followed")

// checkRedirect follows a redirect only within the origin (scheme, host and
// port) of the first request: a server, or whatever answers in its place,
// could otherwise send the token (and a POST's body) to another port of the
// same host or down from https to http, which Go's client allows.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("%w: stopped after %d redirects", errRedirect, len(via))
	}
	from := via[0].URL
	if origin(req.URL) != origin(from) {
		return fmt.Errorf("%w: %s answered with a redirect to %s, another origin than %s, so the token is not sent there (if the API moved, give that address as --server)",
			errRedirect, from.Redacted(), req.URL.Redacted(), origin(from))
	}
	return nil
}

// origin is scheme://host:port of u, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (c *client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = c.base.Path + path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// request sends one request; a non-2xx answer is an *apiError. The caller
// closes the body of the response it gets.
func (c *client) request(ctx context.Context, method, path string, q url.Values, body any, hdr map[string]string) (*http.Response, error) {
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ctype = bytes.NewReader(b), "application/json"
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd, ctype = bytes.NewReader(enc), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path, q), rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if errors.Is(err, errRedirect) {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		return nil, fmt.Errorf("%s %s: %w (is edl dev or edl serve running there? see --server)", method, c.url(path, nil), err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readAPIError(resp, method, path)
	}
	return resp, nil
}

func readAPIError(resp *http.Response, method, path string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &apiError{method: method, path: path}
	if err := json.Unmarshal(b, e); err != nil || e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
		e.Detail = strings.TrimSpace(string(b))
	}
	e.Status = resp.StatusCode
	if e.Status == http.StatusUnauthorized && e.Detail == "" {
		e.Detail = "set --token or EDL_TOKEN (edl dev writes a client config with one)"
	}
	return e
}

// call sends a request and decodes a JSON answer into out (nil: discard).
func (c *client) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.request(ctx, method, path, q, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer := capAnswer(resp.Body)
	if out == nil {
		_, err = io.Copy(io.Discard, answer)
		return answerErr(method, path, err)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		b, err := io.ReadAll(answer)
		if err == nil && !json.Valid(b) {
			err = fmt.Errorf("the answer (%s) is not JSON", contentType(resp))
		}
		*raw = b
		return answerErr(method, path, err)
	}
	if err := json.NewDecoder(answer).Decode(out); err != nil {
		return answerErr(method, path, fmt.Errorf("decode the answer (%s): %w", contentType(resp), err))
	}
	c.shown(out)
	return nil
}

// maxAnswerBytes bounds an answer the client reads whole (a page of 500
// jobs of the largest specs is a few MiB); streams (watch, logs -f, model)
// are not bounded by it. A variable for the tests.
var maxAnswerBytes int64 = 64 << 20

// errAnswerTooLarge is an answer past maxAnswerBytes.
var errAnswerTooLarge = errors.New("answer too large")

// cappedBody fails a read once more than max bytes came, so a server that
// sends without end cannot fill the client's memory.
type cappedBody struct {
	r      io.Reader
	n, max int64
}

func capAnswer(r io.Reader) io.Reader { return &cappedBody{r: r, max: maxAnswerBytes} }

func (c *cappedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n += int64(n); c.n > c.max {
		return 0, fmt.Errorf("%w: more than %d bytes, not an answer of this API", errAnswerTooLarge, c.max)
	}
	return n, err
}

// answerErr names the call whose answer could not be read.
func answerErr(method, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}

// contentType is the answer's media type, for errors about its body.
func contentType(resp *http.Response) string {
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		return "Content-Type " + ct
	}
	return "no Content-Type"
}

// idPath makes the API path of a resource from its ID, checked, and a
// suffix: jobPath, sweepPath.
type idPath func(id string, rest ...string) (string, error)

// jobPath is /v1/jobs/<id> with the ID checked, so that a typo is a usage
// error and not a request for some other route.
func jobPath(id string, rest ...string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#% ") {
		return "", usageErrorf("job ID %q: not a job ID (see 'edl ls')", id)
	}
	return "/v1/jobs/" + id + strings.Join(rest, ""), nil
}

// getByID GETs the resource with that ID (path makes its API path:
// jobPath, sweepPath) and decodes it as a T.
func getByID[T any](ctx context.Context, c *client, path idPath, id string) (T, error) {
	var v T
	p, err := path(id)
	if err != nil {
		return v, err
	}
	err = c.call(ctx, http.MethodGet, p, nil, nil, &v)
	return v, err
}

// callAndShow is the body of a verb whose one argument is an ID: it sends
// method to the API path that path makes of the ID and suffix, and prints
// the answer, a T, as JSON with -o json and with text otherwise.
func callAndShow[T any](ctx context.Context, v *verb, args []string, stdout io.Writer, method string, path idPath, text func(T) error, suffix ...string) error {
	c, p, err := v.openID(args, path, suffix...)
	if err != nil {
		return err
	}
	var x T
	if err := c.call(ctx, method, p, nil, nil, &x); err != nil {
		return err
	}
	if v.json() {
		return writeJSONOut(stdout, x)
	}
	return text(x)
}

// cancelByID is the body of edl cancel and edl sweep cancel: it DELETEs the
// resource whose ID args give (path makes its API path: jobPath, sweepPath)
// and prints its ID and state, the answer being a T that idState reads.
func cancelByID[T any](ctx context.Context, v *verb, args []string, stdout io.Writer, path idPath, idState func(T) (id, state string)) error {
	return callAndShow(ctx, v, args, stdout, http.MethodDelete, path, func(x T) error {
		id, state := idState(x)
		fmt.Fprintf(stdout, "%s %s\n", id, state)
		return nil
	})
}

// isAPIError reports whether err came from the API (exit 1 either way, but
// tests and watch branch on the status).
func isAPIError(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == status
}

// verb is a client verb's flag set with the flags every verb shares:
// --server and --token (into cf) and, for a verb that prints, -o (out).
type verb struct {
	*flag.FlagSet
	name  string
	usage string
	cf    clientFlags
	out   outputFlag
}

// newVerb makes a verb's flag set; output adds -o table|json.
func newVerb(name, usage, summary string, stderr io.Writer, output bool) *verb {
	v := &verb{FlagSet: newVerbFlagSet(name, usage, summary, stderr), name: name, usage: usage}
	v.cf.add(v.FlagSet)
	if output {
		addOutputFlag(v.FlagSet, &v.out)
	}
	return v
}

// json says whether -o json was asked for.
func (v *verb) json() bool { return v.out == "json" }

// parse reads args: flags anywhere, want positional arguments (parseVerb).
func (v *verb) parse(args []string, want int) ([]string, error) {
	return parseVerb(v.FlagSet, args, v.usage, want)
}

// open parses args and opens the client.
func (v *verb) open(args []string, want int) (*client, []string, error) {
	c, pos, err := openVerb(v.FlagSet, args, v.usage, want, &v.cf)
	if err == nil {
		c.display = !v.json()
	}
	return c, pos, err
}

// client opens the client from the flags already parsed; it decodes for
// display unless the verb prints JSON.
func (v *verb) client() (*client, error) {
	c, err := newClient(v.cf)
	if err == nil {
		c.display = !v.json()
	}
	return c, err
}

// openJob parses a verb whose one argument is a job ID, opens the client,
// and returns the job's API path (with suffix appended).
func (v *verb) openJob(args []string, suffix ...string) (*client, string, error) {
	return v.openID(args, jobPath, suffix...)
}

// openID parses a verb whose one argument is an ID, opens the client, and
// returns the API path that path (jobPath, sweepPath) makes of the ID and
// suffix.
func (v *verb) openID(args []string, path idPath, suffix ...string) (*client, string, error) {
	pos, err := v.parse(args, 1)
	if err != nil {
		return nil, "", err
	}
	return v.clientAt(pos[0], path, suffix...)
}

// clientAt is openID's second half, for a verb that checks its arguments
// between parse and opening the client (scale, logs): it opens the client
// from the flags already parsed and returns the API path that path makes
// of id and suffix.
func (v *verb) clientAt(id string, path idPath, suffix ...string) (*client, string, error) {
	c, err := v.client()
	if err != nil {
		return nil, "", err
	}
	p, err := path(id, suffix...)
	if err != nil {
		return nil, "", err
	}
	return c, p, nil
}

// postIdempotent POSTs body to path (with Idempotency-Key when key is set)
// and decodes the answer into v; it returns the answer as sent (for -o
// json) and whether it was a replay of an earlier submit (200, not 201).
// what names the verb in errors.
func (c *client) postIdempotent(ctx context.Context, path string, body []byte, key, what string, v any) (raw []byte, replay bool, err error) {
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.request(cctx, http.MethodPost, path, nil, body, hdr)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	if raw, err = io.ReadAll(capAnswer(resp.Body)); err != nil {
		return nil, false, fmt.Errorf("%s: read the answer: %w", what, err)
	}
	if err := c.decode(raw, v); err != nil {
		return nil, false, fmt.Errorf("%s: decode the answer (%s): %w", what, contentType(resp), err)
	}
	return raw, resp.StatusCode == http.StatusOK, nil
}
