package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// The query parameters of /containerLogs, as the apiserver sends them.
const (
	logParamTailLines    = "tailLines"
	logParamLimitBytes   = "limitBytes"
	logParamSinceSeconds = "sinceSeconds"
	logParamSinceTime    = "sinceTime"
	logParamTimestamps   = "timestamps"
	logParamFollow       = "follow"
	logParamPrevious     = "previous"
)

// ParseLogOptions parses and validates the query of a /containerLogs request:
//
//	tailLines=N     non-negative integer; absent means the whole log (Tail -1)
//	limitBytes=N    non-negative integer; 0 or absent means no limit
//	sinceSeconds=N  non-negative integer; 0 or absent means not set
//	sinceTime=T     RFC 3339 time; not together with sinceSeconds
//	timestamps, follow, previous   booleans (strconv.ParseBool)
//
// An empty value counts as absent; a repeated parameter takes its first
// value. Any other value gives an error of kind errdefs.InvalidInput whose
// message names the parameter.
func ParseLogOptions(q url.Values) (ContainerLogOpts, error) {
	opts := ContainerLogOpts{Tail: -1}
	var err error
	if opts.Tail, err = intParam(q, logParamTailLines, -1); err != nil {
		return ContainerLogOpts{}, err
	}
	if opts.LimitBytes, err = intParam(q, logParamLimitBytes, 0); err != nil {
		return ContainerLogOpts{}, err
	}
	if opts.SinceSeconds, err = intParam(q, logParamSinceSeconds, 0); err != nil {
		return ContainerLogOpts{}, err
	}
	if v := q.Get(logParamSinceTime); v != "" {
		if q.Get(logParamSinceSeconds) != "" {
			return ContainerLogOpts{}, errdefs.InvalidInputf("%s and %s cannot be given together", logParamSinceSeconds, logParamSinceTime)
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return ContainerLogOpts{}, errdefs.InvalidInputf("%s: %q is not an RFC 3339 time", logParamSinceTime, v)
		}
		opts.SinceTime = t
	}
	if opts.Timestamps, err = boolParam(q, logParamTimestamps); err != nil {
		return ContainerLogOpts{}, err
	}
	if opts.Follow, err = boolParam(q, logParamFollow); err != nil {
		return ContainerLogOpts{}, err
	}
	if opts.Previous, err = boolParam(q, logParamPrevious); err != nil {
		return ContainerLogOpts{}, err
	}
	return opts, nil
}

func intParam(q url.Values, name string, absent int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return absent, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errdefs.InvalidInputf("%s: %q is not an integer", name, v)
	}
	if n < 0 {
		return 0, errdefs.InvalidInputf("%s: must not be negative, got %d", name, n)
	}
	return n, nil
}

func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errdefs.InvalidInputf("%s: %q is not a boolean", name, v)
	}
	return b, nil
}

func (s *server) containerLogs(w http.ResponseWriter, r *http.Request) {
	if s.cfg.GetContainerLogs == nil {
		notImplemented(w, "container logs")
		return
	}
	opts, err := ParseLogOptions(r.URL.Query())
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	ctx := r.Context()
	rc, err := s.cfg.GetContainerLogs(ctx, r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"), opts)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	if rc == nil {
		rc = io.NopCloser(http.NoBody)
	}
	// Close the log when the client goes away, so that a Read blocked
	// waiting for new lines returns even if the provider ignores ctx.
	var once sync.Once
	closeLog := func() { once.Do(func() { _ = rc.Close() }) }
	stop := context.AfterFunc(ctx, closeLog)
	defer func() {
		stop()
		closeLog()
	}()
	copyLog(ctx, w, rc, opts)
}

// copyLog copies the log to the response, at most opts.LimitBytes of it,
// flushing after each chunk when following.
func copyLog(ctx context.Context, w http.ResponseWriter, src io.Reader, opts ContainerLogOpts) {
	if opts.LimitBytes > 0 {
		src = io.LimitReader(src, int64(opts.LimitBytes))
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	started := false
	if opts.Follow {
		// Let the client see the response at once, not at the first line.
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		started = true
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			started = true
			if opts.Follow {
				_ = rc.Flush()
			}
		}
		if err != nil {
			// A failure before the first byte can still be reported; later
			// the response just ends.
			if !started && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				writeError(ctx, w, err)
			}
			return
		}
	}
}
