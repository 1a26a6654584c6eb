package node

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// TestEnvSeesObjectsTheCachesLack: a ConfigMap and a Secret the API server
// has but the informers' caches do not yet (created just before the pod)
// are read from the API server, as a kubelet reads them: the pod gets
// their values, and a missing key is reported as a missing key, not as a
// missing object. Without ObjectClient, the caches' answer stands.
func TestEnvSeesObjectsTheCachesLack(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "from-cm"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("from-secret")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c",
		Env: []corev1.EnvVar{
			{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: ptr.To(true)}}},
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k", Optional: ptr.To(true)}}},
			{Name: "ABSENT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "absent", Optional: ptr.To(true)}}},
		},
	}}}}

	for _, tc := range []struct {
		name       string
		live       bool
		getErr     error // what the API server answers GETs with
		wantEnv    map[string]string
		wantReason string // of the ABSENT reference
	}{
		{name: "confirmed", live: true, wantEnv: map[string]string{"CM": "from-cm", "SECRET": "from-secret"}, wantReason: ReasonOptionalSecretKeyNotFound},
		{name: "no client", wantEnv: map[string]string{}, wantReason: ReasonOptionalSecretNotFound},
		{name: "read fails", live: true, getErr: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no get")),
			wantEnv: map[string]string{}, wantReason: ReasonOptionalSecretNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(cm, secret)
			var gets int
			client.PrependReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return tc.getErr != nil, nil, tc.getErr
			})
			// Not started: the caches are empty, as ones behind the pod are.
			factory := informers.NewSharedInformerFactory(client, 0)
			recorder := record.NewFakeRecorder(10)
			cfg := PodControllerConfig{
				PodClient: client.CoreV1(), PodInformer: factory.Core().V1().Pods(), EventRecorder: recorder, Provider: nopProvider{},
				ConfigMapInformer: factory.Core().V1().ConfigMaps(), SecretInformer: factory.Core().V1().Secrets(),
			}
			if tc.live {
				cfg.ObjectClient = client.CoreV1()
			}
			pc, err := NewPodController(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pc.resolveEnv(pod)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, e := range got.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if len(env) != len(tc.wantEnv) {
				t.Errorf("env %v, want %v", env, tc.wantEnv)
			}
			for k, v := range tc.wantEnv {
				if env[k] != v {
					t.Errorf("env %s = %q, want %q", k, env[k], v)
				}
			}
			var reasons []string
			for len(recorder.Events) > 0 {
				reasons = append(reasons, <-recorder.Events)
			}
			if !strings.Contains(strings.Join(reasons, "\n"), tc.wantReason) {
				t.Errorf("events %q, want one with %s", reasons, tc.wantReason)
			}
			if wantGets := map[bool]int{true: 2}[tc.live]; gets != wantGets {
				t.Errorf("%d GETs, want %d (one per object the caches lack)", gets, wantGets)
			}
		})
	}
}

// TestConfirmedListerTakesTheCacheFirst: an object in the cache is not
// read again from the API server.
func TestConfirmedListerTakesTheCacheFirst(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	client := fake.NewClientset()
	client.PrependReactor("get", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
		return false, nil, nil
	})
	secrets := informers.NewSharedInformerFactory(client, 0).Core().V1().Secrets()
	if err := secrets.Informer().GetIndexer().Add(secret); err != nil {
		t.Fatal(err)
	}
	got, err := confirmedSecrets{secrets.Lister(), client.CoreV1()}.Secrets("ns").Get("s")
	if err != nil || got != secret {
		t.Fatalf("Get = %v, %v; want the cached object", got, err)
	}
}
