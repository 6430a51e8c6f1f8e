package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// Log streams of a worker's program.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxLogTail bounds ?tail.
const MaxLogTail = 100000

// LogSource reads what a worker's program wrote: the local cluster's files
// (local.Cluster) or the allocation's task logs (nomadx.Cluster).
type LogSource interface {
	// Logs opens one stream (StreamStdout or StreamStderr) of a worker of
	// jobID. tail > 0 starts at the last tail lines, 0 at the oldest byte
	// kept. With follow the reader goes on with what is written until ctx
	// ends or the worker has exited and all of it was read; without, it
	// ends at what is there now. A worker that is not the job's, or has no
	// log yet, is an error wrapping fs.ErrNotExist.
	Logs(ctx context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error)
}

// logQuery is GET .../logs's parameters, checked.
type logQuery struct {
	worker, stream string
	tail           int
	follow, sse    bool
}

func parseLogQuery(c echo.Context) (logQuery, error) {
	q := logQuery{worker: c.QueryParam("worker"), stream: c.QueryParam("stream")}
	switch q.stream {
	case "":
		q.stream = StreamStdout
	case StreamStdout, StreamStderr:
	default:
		return q, badQuery("stream", "must be stdout or stderr")
	}
	if t := c.QueryParam("tail"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > MaxLogTail {
			return q, badQuery("tail", fmt.Sprintf("must be an integer between 0 and %d (0: everything kept)", MaxLogTail))
		}
		q.tail = n
	}
	switch f := c.QueryParam("follow"); f {
	case "", "false", "0":
	case "true", "1":
		q.follow = true
	default:
		return q, badQuery("follow", "must be true or false")
	}
	if len(q.worker) > 255 || strings.ContainsAny(q.worker, "/\\\x00") {
		return q, badQuery("worker", "not a worker ID")
	}
	if strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream") {
		q.sse, q.follow = true, true
	}
	return q, nil
}

// jobLogs godoc
//
//	@Summary		A worker's program output
//	@Description	What the job's program wrote to stdout or stderr on one worker (exec jobs; builtin workers log their own lines to stderr). Without worker, the log of rank 0 of the current generation (of a finished job: its last; else the live worker with the lowest index). A finished job's workers and logs stay readable as long as the cluster keeps them (edl dev: as long as the log files; Nomad: until it garbage-collects the allocations); X-Edl-Worker names the worker served. tail=N starts at the last N lines. With follow=true the body is chunked text that goes on until the worker exits or the client leaves; with Accept: text/event-stream (which implies follow) each line is an SSE event "log" and the stream ends with an event "end". Local clusters keep rotated files (the oldest part of a long log is gone); Nomad serves the allocation's task logs.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		plain
//	@Produce		text/event-stream
//	@Param			id		path		string	true	"job ID"
//	@Param			worker	query		string	false	"worker ID (GET .../workers lists them); default rank 0"
//	@Param			stream	query		string	false	"stdout (default) or stderr"	Enums(stdout, stderr)
//	@Param			tail	query		int		false	"start at the last N lines, 0-100000 (default 0: everything kept)"
//	@Param			follow	query		bool	false	"keep streaming what is written"
//	@Success		200		{string}	string	"the log text"
//	@Header			200		{string}	X-Edl-Worker	"the worker whose log this is"
//	@Failure		400		{object}	Problem	"a bad parameter, named in errors"
//	@Failure		401		{object}	Problem
//	@Failure		404		{object}	Problem	"no such job, worker or log"
//	@Failure		429		{object}	Problem	"follow: the tenant holds its most streams open (event streams and followed logs, --max-streams-per-tenant); Retry-After"
//	@Failure		503		{object}	Problem	"no log source attached"
//	@Router			/v1/jobs/{id}/logs [get]
func (s *Server) jobLogs(c echo.Context) error {
	q, err := parseLogQuery(c)
	if err != nil {
		return err
	}
	j, err := s.ownJob(c)
	if err != nil {
		return err
	}
	if s.cfg.Logs == nil {
		return newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "no log source is attached", "this server serves no worker logs")
	}
	// A named worker is asked for even when the cluster no longer lists it
	// (a finished job's): the source serves only this job's workers' logs.
	if q.worker == "" {
		if s.cfg.Workers == nil {
			return badQuery("worker", "required: this server cannot list the job's workers")
		}
		ctx, cancel := s.storeCtx(c)
		list, err := s.jobWorkers(ctx, j.ID)
		cancel()
		if err != nil {
			return err
		}
		w, ok := defaultWorker(list)
		if !ok && (j.State == jobs.Pending || j.State == jobs.Starting) {
			return newProblem(http.StatusNotFound, ProblemNotFound, "the job has not started a worker yet",
				fmt.Sprintf("it is %s: a worker's log exists once the planner starts one (its events say when)", j.State))
		}
		if !ok {
			return newProblem(http.StatusNotFound, ProblemNotFound, "the job has no workers now", "name one with ?worker= (its ID is in the job's events)")
		}
		q.worker = w.ID
	}
	ctx, stop := c.Request().Context(), context.CancelFunc(func() {})
	if q.follow {
		release, err := s.takeStream(c, "; close one, or read the log without follow")
		if err != nil {
			return err
		}
		defer release()
		ctx, stop = s.streamCtx(c)
		defer stop()
	}
	rc, err := s.cfg.Logs.Logs(ctx, j.ID, q.worker, q.stream, q.tail, q.follow)
	if errors.Is(err, fs.ErrNotExist) {
		// The source's error names where it looked (a file path on the
		// server): logged, never sent.
		s.log.Debug("no log", "job", j.ID, "worker", q.worker, "stream", q.stream, "err", err)
		return newProblem(http.StatusNotFound, ProblemNotFound, "no log for this worker yet",
			fmt.Sprintf("worker %s of job %s has no %s log (GET .../workers lists the job's workers)", q.worker, j.ID, q.stream))
	}
	if err != nil {
		return fmt.Errorf("logs of %s/%s: %w", j.ID, q.worker, err)
	}
	defer rc.Close()
	s.streamWrites(c) // a log has no bound on its length: each write gets a deadline
	h := c.Response().Header()
	h.Set("X-Edl-Worker", q.worker)
	h.Set("Cache-Control", "no-cache")
	if q.sse {
		return s.streamLogSSE(ctx, stop, c, rc)
	}
	h.Set(echo.HeaderContentType, "text/plain; charset=utf-8")
	if q.follow {
		h.Set("X-Accel-Buffering", "no")
	}
	c.Response().WriteHeader(http.StatusOK)
	w := c.Response()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the client left
			}
			if q.follow {
				w.Flush()
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && ctx.Err() == nil {
				s.log.Warn("log stream ended", "job", j.ID, "worker", q.worker, "err", rerr)
			}
			return nil // headers are sent: an error can only cut the body
		}
	}
}

// streamLogSSE sends each line as an event "log" (a line longer than 1 MiB
// is cut into several), keep-alive comments while the program is quiet, and
// an event "end" when the log ends. rc is read on a goroutine of its own;
// before it returns (and its caller closes rc) it stops the reader (stop
// ends ctx, the one rc was opened with) and waits for that goroutine: a
// log reader is not safe to close while it reads.
func (s *Server) streamLogSSE(ctx context.Context, stop context.CancelFunc, c echo.Context, rc io.Reader) error {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	w.Flush()
	lines := make(chan string, 64)
	errc := make(chan error, 1)
	read := make(chan struct{})
	defer func() {
		stop()
		<-read
	}()
	go func() {
		defer close(read)
		br := bufio.NewReaderSize(rc, 64<<10)
		var part strings.Builder
		for {
			chunk, isPrefix, err := br.ReadLine()
			part.Write(chunk)
			if err == nil && (!isPrefix || part.Len() >= 1<<20) {
				select {
				case lines <- part.String():
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
				part.Reset()
			}
			if err != nil {
				if part.Len() > 0 { // a last line without its newline
					select {
					case lines <- part.String():
					case <-ctx.Done():
					}
				}
				errc <- err
				close(lines)
				return
			}
		}
	}()
	keep := time.NewTicker(s.cfg.SSEKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			w.Flush()
		case line, ok := <-lines:
			if !ok {
				fmt.Fprint(w, "event: end\ndata: {}\n\n")
				w.Flush()
				return nil
			}
			// A CR would end the SSE line early.
			if _, err := fmt.Fprintf(w, "event: log\ndata: %s\n\n", strings.ReplaceAll(line, "\r", "")); err != nil {
				return nil
			}
			// Flush when nothing else is waiting, to batch bursts.
			if len(lines) == 0 {
				w.Flush()
			}
		}
	}
}
