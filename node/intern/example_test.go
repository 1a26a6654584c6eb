package intern_test

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// Two pods of one Deployment, decoded each with its own labels, hold one
// map once an Interner has seen them; the Interner is its owner's, here
// the example's, not the process's.
func Example() {
	in := intern.New()
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}}
	}
	a, b := pod("web-1"), pod("web-2")
	in.Pod(a)
	in.Pod(b)
	fmt.Println(reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(b.Labels).UnsafePointer())
	// Output: true
}
