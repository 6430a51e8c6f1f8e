package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// chaosClient calls the API as the chaos tenant and counts the answers.
type chaosClient struct {
	base, token string
	hc          *http.Client
	redisDown   atomic.Bool // set while the bench has Redis down
	requests    atomic.Int64
	n5xx        atomic.Int64
	n503down    atomic.Int64
	errors      atomic.Int64
}

type chaosCounts struct{ requests, n5xx, n503down, errors int64 }

func newChaosClient(base, token string) *chaosClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128
	return &chaosClient{base: base, token: token, hc: &http.Client{Timeout: 30 * time.Second, Transport: tr}}
}

func (c *chaosClient) counts() chaosCounts {
	return chaosCounts{c.requests.Load(), c.n5xx.Load(), c.n503down.Load(), c.errors.Load()}
}

// do sends one request and decodes a 2xx JSON answer into out; it returns
// the status (0 when there was no answer).
func (c *chaosClient) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.requests.Add(1)
	down := c.redisDown.Load()
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.errors.Add(1)
		}
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && (down || c.redisDown.Load()):
		c.n503down.Add(1)
	case resp.StatusCode >= 500:
		c.n5xx.Add(1)
	}
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, err
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}
