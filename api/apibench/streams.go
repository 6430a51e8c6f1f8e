package apibench

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"time"
)

// openStreams opens n idle Server-Sent Event streams (events?follow=true)
// spread over the jobs, each on its own connection, and returns once every
// one has been answered 200: they then sit idle, as dashboards left open do.
func openStreams(addr string, jobIDs []string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		conns = append(conns, c)
		req := request(http.MethodGet, addr, "/v1/jobs/"+jobIDs[i%len(jobIDs)]+"/events?follow=true", benchToken, nil)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			closeAll(conns)
			return nil, fmt.Errorf("stream %d: status %d", i, resp.StatusCode)
		}
		_ = c.SetDeadline(time.Time{})
	}
	return conns, nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}
