package apibench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// conn is a lean HTTP/1.1 keep-alive client on one TCP connection, used by
// one goroutine at a time: a request is one write of pre-rendered bytes and
// a read of the answer. net/http's Transport hands each request between
// three goroutines (caller, writeLoop, readLoop); on a 2-core machine shared
// with the server under test that costs the server a good part of its CPU.
type conn struct {
	addr    string
	timeout time.Duration
	c       net.Conn
	br      *bufio.Reader
}

// request renders a request with the bench's token (body may be nil).
func request(method, host, path, token string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", method, path, host, token)
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// do sends req and returns the answer's status and Location header. On any
// error the connection is dropped; the next call dials a new one.
func (c *conn) do(req []byte) (int, string, error) {
	if c.c == nil {
		nc, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, "", err
		}
		c.c, c.br = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	status, loc, err := c.roundTrip(req)
	if err != nil {
		c.close()
	}
	return status, loc, err
}

func (c *conn) roundTrip(req []byte) (int, string, error) {
	if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, "", err
	}
	if _, err := c.c.Write(req); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, "", err
	}
	if resp.Close || strings.EqualFold(resp.Header.Get("Connection"), "close") {
		c.close()
	}
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c, c.br = nil, nil
	}
}
