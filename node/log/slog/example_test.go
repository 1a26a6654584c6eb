package slog_test

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/vkubelet/virtual-kubelet/node/log"
	vkslog "github.com/vkubelet/virtual-kubelet/node/log/slog"
)

func Example() {
	// Drop the time so that the output is reproducible.
	handler := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	ctx := log.WithLogger(context.Background(), vkslog.FromSlog(slog.New(handler)))
	log.G(ctx).WithField("pod", "default/web").Info("created")
	log.G(ctx).WithError(errors.New("quota")).Warnf("retrying in %ds", 5)
	log.G(ctx).Debug("not shown: below the handler's level")
	// Output:
	// level=INFO msg=created pod=default/web
	// level=WARN msg="retrying in 5s" error=quota
}
