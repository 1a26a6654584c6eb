package klogv2_test

import (
	"context"
	"errors"
	"flag"
	"os"

	"k8s.io/klog/v2"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/log/klogv2"
)

func Example() {
	// klog to stdout without its time and source header, so that the
	// output is reproducible.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Parse([]string{"-logtostderr=false", "-skip_headers", "-stderrthreshold=FATAL"})
	klog.SetOutputBySeverity("INFO", os.Stdout) // every entry, once

	ctx := log.WithLogger(context.Background(), klogv2.New(log.Fields{"node": "vk0"}))
	log.G(ctx).WithField("pod", "default/web").Info("created")
	log.G(ctx).WithError(errors.New("quota")).Errorf("create failed %d times", 2)
	log.G(ctx).Warn("slow")
	log.G(ctx).Debug("not shown below -v=4")
	klog.Flush()
	// Output:
	// "created" node="vk0" pod="default/web"
	// "create failed 2 times" err="quota" node="vk0"
	// slow node="vk0"
}
