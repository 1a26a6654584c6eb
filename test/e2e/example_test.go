package e2e_test

import (
	"fmt"

	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// A provider's repository runs the suite from one of its tests, against the
// node its daemon serves:
//
//	func TestEndToEnd(t *testing.T) {
//		e2e.NewEndToEndTestSuite(cfg).Run(t)
//	}
//
// and declares what its backend does not do through ShouldSkipTest.
func ExampleNewEndToEndTestSuite() {
	suite := e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
		Kubeconfig: "/path/to/kubeconfig",
		NodeName:   "vk-mine",
		ShouldSkipTest: func(name string) bool {
			return name == "TestExec" // the backend has no exec
		},
	})
	fmt.Println(suite.ShouldSkipTest("TestExec"), suite.ShouldSkipTest("TestGetPods"))
	// Output: true false
}
