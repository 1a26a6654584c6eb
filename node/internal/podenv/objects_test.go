package podenv

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestObjectsGet(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range []any{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": []byte("2")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Immutable: ptr.To(true)},
	} {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	sidx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := sidx.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	o := Objects{ConfigMaps: corev1listers.NewConfigMapLister(idx), Secrets: corev1listers.NewSecretLister(sidx)}

	env, err := o.Get("ConfigMap", "ns", "cm", false)
	if err != nil || len(env.Data) != 1 || env.Data["a"] != "1" {
		t.Errorf("env's view of a ConfigMap: %+v, %v (want data only)", env, err)
	}
	vol, err := o.Get("ConfigMap", "ns", "cm", true)
	if err != nil || vol.Data["a"] != "1" || vol.Data["b"] != "2" {
		t.Errorf("a volume's view of a ConfigMap: %+v, %v (want data and binaryData)", vol, err)
	}
	empty, err := o.Get("ConfigMap", "ns", "empty", false)
	if err != nil || empty == nil || empty.Data == nil || !empty.Immutable {
		t.Errorf("an empty immutable ConfigMap: %+v, %v (want empty data, immutable)", empty, err)
	}
	s, err := o.Get("Secret", "ns", "s", false)
	if err != nil || s.Data["k"] != "v" {
		t.Errorf("a Secret: %+v, %v", s, err)
	}
	if missing, err := o.Get("Secret", "ns", "nope", false); missing != nil || err != nil {
		t.Errorf("a missing Secret: %+v, %v (want nil, nil)", missing, err)
	}
	_, err = Objects{}.Get("Secret", "ns", "s", false)
	var invalid *InvalidError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), `secret "s": no Secret lister`) {
		t.Errorf("no lister: %v", err)
	}
}
