package slog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node/log"
	vkslog "github.com/vkubelet/virtual-kubelet/node/log/slog"
)

// TestSourceIsTheCaller: with AddSource, entries name the line that logged
// them, not the adapter.
func TestSourceIsTheCaller(t *testing.T) {
	var buf bytes.Buffer
	l := vkslog.FromSlog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{AddSource: true, Level: slog.LevelDebug})))
	l.WithFields(log.Fields{"a": 1}).Debugf("n=%d", 1)
	l.Error("failed")
	out := buf.String()
	if strings.Count(out, "slog_test.go:") != 2 || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "a=1") || !strings.Contains(out, "level=ERROR") {
		t.Errorf("output:\n%s", out)
	}
}
