package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

func TestKlogGoesThroughLogrus(t *testing.T) {
	var buf bytes.Buffer
	if err := Configure("debug", &buf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Configure("info", nil) })
	klog.InfoS("reflector started", "resource", "pods")
	klog.V(3).InfoS("verbose detail")
	klog.V(6).InfoS("too verbose")
	klog.ErrorS(errors.New("boom"), "watch failed")
	klog.Flush()
	out := buf.String()
	for _, want := range []string{`level=info msg="reflector started" resource=pods`, `level=debug msg="verbose detail"`, `level=error msg="watch failed" error=boom`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "too verbose") {
		t.Error("V(6) must be trace, below debug")
	}
	if logrus.GetLevel() != logrus.DebugLevel {
		t.Error("level not set")
	}
}

func TestBadLevel(t *testing.T) {
	err := Configure("loud", nil)
	if err == nil || !strings.Contains(err.Error(), `--log-level: "loud"`) {
		t.Errorf("err = %v", err)
	}
}
