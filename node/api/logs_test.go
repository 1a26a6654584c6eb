package api_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func TestParseLogOptions(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		query   string
		want    api.ContainerLogOpts
		wantErr string // a parameter name the error must mention
	}{
		{"", api.ContainerLogOpts{Tail: -1}, ""},
		{"tailLines=0", api.ContainerLogOpts{Tail: 0}, ""},
		{"tailLines=5&limitBytes=100&sinceSeconds=30", api.ContainerLogOpts{Tail: 5, LimitBytes: 100, SinceSeconds: 30}, ""},
		{"timestamps=true&follow=1&previous=false", api.ContainerLogOpts{Tail: -1, Timestamps: true, Follow: true}, ""},
		{"sinceTime=2026-01-02T03:04:05Z", api.ContainerLogOpts{Tail: -1, SinceTime: since}, ""},
		{"sinceTime=2026-01-02T04:04:05%2B01:00", api.ContainerLogOpts{Tail: -1, SinceTime: since}, ""},
		{"tailLines=&follow=", api.ContainerLogOpts{Tail: -1}, ""},
		{"tailLines=3&tailLines=-1", api.ContainerLogOpts{Tail: 3}, ""},

		{"tailLines=-1", api.ContainerLogOpts{}, "tailLines"},
		{"tailLines=ten", api.ContainerLogOpts{}, "tailLines"},
		{"tailLines=1.5", api.ContainerLogOpts{}, "tailLines"},
		{"tailLines=99999999999999999999999", api.ContainerLogOpts{}, "tailLines"},
		{"limitBytes=-5", api.ContainerLogOpts{}, "limitBytes"},
		{"limitBytes=1k", api.ContainerLogOpts{}, "limitBytes"},
		{"sinceSeconds=-1", api.ContainerLogOpts{}, "sinceSeconds"},
		{"sinceSeconds=%20", api.ContainerLogOpts{}, "sinceSeconds"},
		{"sinceTime=yesterday", api.ContainerLogOpts{}, "sinceTime"},
		{"sinceTime=2026-01-02", api.ContainerLogOpts{}, "sinceTime"},
		{"sinceSeconds=10&sinceTime=2026-01-02T03:04:05Z", api.ContainerLogOpts{}, "sinceSeconds and sinceTime"},
		{"timestamps=yes", api.ContainerLogOpts{}, "timestamps"},
		{"follow=2", api.ContainerLogOpts{}, "follow"},
		{"previous=nope", api.ContainerLogOpts{}, "previous"},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.ParseLogOptions(q)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errdefs.IsInvalidInput(err) {
				t.Errorf("%q: error %v, want an InvalidInput naming %q", c.query, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if !got.SinceTime.Equal(c.want.SinceTime) {
			t.Errorf("%q: SinceTime %v, want %v", c.query, got.SinceTime, c.want.SinceTime)
		}
		got.SinceTime, c.want.SinceTime = time.Time{}, time.Time{}
		if got != c.want {
			t.Errorf("%q: %+v, want %+v", c.query, got, c.want)
		}
	}
}

// FuzzParseLogOptions: any query either parses into options that are valid
// or fails with an InvalidInput error; it never panics.
func FuzzParseLogOptions(f *testing.F) {
	for _, seed := range []string{
		"", "tailLines=10", "tailLines=-1", "tailLines=0&limitBytes=0", "limitBytes=1048576",
		"sinceSeconds=3600", "sinceSeconds=-3", "sinceTime=2026-01-02T03:04:05.123456789Z",
		"sinceTime=garbage", "sinceSeconds=1&sinceTime=2026-01-02T03:04:05Z",
		"follow=true&timestamps=1&previous=F", "follow=yes", "tailLines=%00", "tailLines=9223372036854775808",
		"a=b&&&=&tailLines", "%zz", "timestamps=TRUE&timestamps=false",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			// ParseQuery keeps what it could parse: use that too.
			_ = err
		}
		opts, err := api.ParseLogOptions(q)
		if err != nil {
			if !errdefs.IsInvalidInput(err) {
				t.Fatalf("%q: error %v is not InvalidInput", query, err)
			}
			if opts != (api.ContainerLogOpts{}) {
				t.Fatalf("%q: error with non-zero options %+v", query, opts)
			}
			return
		}
		if opts.Tail < -1 || opts.LimitBytes < 0 || opts.SinceSeconds < 0 {
			t.Fatalf("%q: invalid options %+v", query, opts)
		}
		if opts.SinceSeconds > 0 && !opts.SinceTime.IsZero() {
			t.Fatalf("%q: both sinceSeconds and sinceTime set: %+v", query, opts)
		}
	})
}

func TestLogs(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	h := api.PodHandler(f.config(), true)

	code, body := do(t, h, "GET", "/containerLogs/ns/web/app")
	if code != 200 || strings.Count(body, "\n") != 10 || !strings.HasPrefix(body, "app line 1\n") {
		t.Errorf("whole log: %d %q", code, body)
	}
	code, body = do(t, h, "GET", "/containerLogs/ns/web/app?tailLines=2&timestamps=true")
	want := logLine("app", 9, true) + logLine("app", 10, true)
	if code != 200 || body != want {
		t.Errorf("tail with timestamps: %d %q, want %q", code, body, want)
	}
}

// TestLogsLimitBytes: the handler enforces limitBytes when the provider
// does not.
func TestLogsLimitBytes(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	h := api.PodHandler(f.config(), true)
	for _, limit := range []string{"1", "15", "1000000"} {
		code, body := do(t, h, "GET", "/containerLogs/ns/web/app?limitBytes="+limit)
		full := ""
		for i := 1; i <= 10; i++ {
			full += logLine("app", i, false)
		}
		want := full
		switch limit {
		case "1":
			want = full[:1]
		case "15":
			want = full[:15]
		}
		if code != 200 || body != want {
			t.Errorf("limitBytes=%s: %d %q, want %q", limit, code, body, want)
		}
	}
	// With follow too: the stream ends at the limit.
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/containerLogs/ns/web/app?follow=true&tailLines=1&limitBytes=40", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 40 {
		t.Errorf("follow with limitBytes=40: %d bytes %q, %v", len(b), b, err)
	}
}

// TestLogsFollow: lines arrive as they are written, and the provider's
// stream ends when the client goes away.
func TestLogsFollow(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	srv := httptest.NewServer(api.PodHandler(f.config(), true))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/containerLogs/ns/web/app?follow=true&tailLines=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	for i := 10; i < 14; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want := logLine("app", i, false); line != want {
			t.Fatalf("got %q, want %q", line, want)
		}
	}
	cancel()
	select {
	case <-f.followDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's log stream did not end after the client left")
	}
}

func TestContainerLogOptsSince(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	at := now.Add(-time.Hour)
	for _, tc := range []struct {
		opts api.ContainerLogOpts
		want time.Time
	}{
		{api.ContainerLogOpts{}, time.Time{}},
		{api.ContainerLogOpts{SinceTime: at}, at},
		{api.ContainerLogOpts{SinceSeconds: 90}, now.Add(-90 * time.Second)},
	} {
		if got := tc.opts.Since(now); !got.Equal(tc.want) {
			t.Errorf("%+v: Since = %v, want %v", tc.opts, got, tc.want)
		}
	}
}
