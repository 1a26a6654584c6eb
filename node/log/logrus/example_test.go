package logrus_test

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/vkubelet/virtual-kubelet/node/log"
	vklogrus "github.com/vkubelet/virtual-kubelet/node/log/logrus"
)

func Example() {
	logger := logrus.New()
	logger.SetOutput(os.Stdout)
	logger.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})

	ctx := log.WithLogger(context.Background(), vklogrus.FromLogrus(logrus.NewEntry(logger)))
	log.G(ctx).WithField("pod", "default/web").Info("created")
	// Output: level=info msg=created pod=default/web
}
