package log_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

func TestContextLoggerCarriesFields(t *testing.T) {
	if log.G(context.Background()) != log.L {
		t.Error("a context without a logger must get L")
	}
	logger, hook := test.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	ctx := log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger)))
	ctx = log.WithFields(ctx, log.Fields{"node": "vk0"})
	log.G(ctx).WithField("pod", "web").WithError(errors.New("boom")).Warnf("failed %d times", 3)
	log.GetLogger(ctx).WithFields(log.Fields{"queue": "sync"}).Debug("retrying")

	entries := hook.AllEntries()
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
	first := entries[0]
	if first.Level != logrus.WarnLevel || first.Message != "failed 3 times" || first.Data["node"] != "vk0" || first.Data["pod"] != "web" || first.Data["error"] == nil {
		t.Errorf("first entry: %v %q %v", first.Level, first.Message, first.Data)
	}
	if second := entries[1]; second.Data["node"] != "vk0" || second.Data["queue"] != "sync" || second.Data["pod"] != nil {
		t.Errorf("second entry fields: %v", second.Data)
	}
}

// TestWithFieldsKeepsALoggerThatHasThem: fields the logger has already,
// with the same string values, make no new logger; any other does.
func TestWithFieldsKeepsALoggerThatHasThem(t *testing.T) {
	logger, hook := test.NewNullLogger()
	ctx := log.WithFields(log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger))), log.Fields{"node": "vk0"})
	if again := log.WithFields(ctx, log.Fields{"node": "vk0"}); again != ctx {
		t.Error("the same node field again made a new logger")
	}
	for _, f := range []log.Fields{{"node": "vk1"}, {"node": "vk0", "pod": "web"}, {"count": 1}} {
		other := log.WithFields(ctx, f)
		if other == ctx {
			t.Errorf("fields %v kept the logger", f)
			continue
		}
		log.G(other).Info("x")
		got := hook.LastEntry().Data
		for k, v := range f {
			if got[k] != v {
				t.Errorf("fields %v: logged %s=%v", f, k, got[k])
			}
		}
	}
}
