package daemon_test

import (
	"context"
	"fmt"

	"github.com/vkubelet/virtual-kubelet/daemon"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// A binary of your own picks the providers it is built with: here the
// mock, registered by this package under a name of its choosing.
func init() { provider.Register("demo", mock.New) }

// Execute is the whole command line: `providers` lists what this binary
// was built with; `--provider demo --nodename vk0` would run the node.
func Example() {
	code := daemon.Execute(context.Background(), []string{"providers"})
	fmt.Println("exit", code)
	// Output:
	// demo
	// exit 0
}
