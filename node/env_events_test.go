package node

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node/internal/podenv"
)

func TestRecordMissingRefsReasons(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	pc := &PodController{recorder: rec}
	pod := &corev1.Pod{}
	pc.recordMissingRefs(pod, false,
		podenv.MissingError{Kind: "ConfigMap", Namespace: "ns", Name: "a"},
		podenv.MissingError{Kind: "ConfigMap", Namespace: "ns", Name: "a", Key: "k"},
		podenv.MissingError{Kind: "Secret", Namespace: "ns", Name: "s"},
		podenv.MissingError{Kind: "Secret", Namespace: "ns", Name: "s", Key: "k"})
	pc.recordMissingRefs(pod, true,
		podenv.MissingError{Kind: "ConfigMap", Namespace: "ns", Name: "a"},
		podenv.MissingError{Kind: "ConfigMap", Namespace: "ns", Name: "a", Key: "k"},
		podenv.MissingError{Kind: "Secret", Namespace: "ns", Name: "s"},
		podenv.MissingError{Kind: "Secret", Namespace: "ns", Name: "s", Key: "k"})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		`Warning MandatoryConfigMapNotFound configmap "a" not found`,
		`Warning MandatoryConfigMapKeyNotFound couldn't find key k in ConfigMap ns/a`,
		`Warning MandatorySecretNotFound secret "s" not found`,
		`Warning MandatorySecretKeyNotFound couldn't find key k in Secret ns/s`,
		`Warning OptionalConfigMapNotFound skipping optional reference: configmap "a" not found`,
		`Warning OptionalConfigMapKeyNotFound skipping optional reference: couldn't find key k in ConfigMap ns/a`,
		`Warning OptionalSecretNotFound skipping optional reference: secret "s" not found`,
		`Warning OptionalSecretKeyNotFound skipping optional reference: couldn't find key k in Secret ns/s`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}
