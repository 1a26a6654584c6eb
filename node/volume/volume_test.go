package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// listers serves objs through an informer factory over a fake clientset.
func listers(t *testing.T, objs ...runtime.Object) (corev1listers.ConfigMapLister, corev1listers.SecretLister) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	cms, secrets := factory.Core().V1().ConfigMaps().Lister(), factory.Core().V1().Secrets().Lister()
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	return cms, secrets
}

// tokenClient answers TokenRequests with a numbered token valid for the
// requested time, and records the requests.
func tokenClient(now func() time.Time, requests *[]*authenticationv1.TokenRequest) *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateAction)
		if create.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := create.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		*requests = append(*requests, tr)
		tr.Status.Token = fmt.Sprintf("token-%d-for-%s", len(*requests), create.(k8stesting.CreateActionImpl).Name)
		tr.Status.ExpirationTimestamp = metav1.NewTime(now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
		return true, tr, nil
	})
	return client
}

// tokenFake is a Tokens over tokenClient on a clock that stands at now
// until a test moves it; requests are what it asked for.
type tokenFake struct {
	tokens   *Tokens
	requests []*authenticationv1.TokenRequest
	now      time.Time
}

func newTokenFake(maxAge time.Duration) *tokenFake {
	f := &tokenFake{now: time.Now()}
	clock := func() time.Time { return f.now }
	f.tokens = NewTokens(tokenClient(clock, &f.requests).CoreV1(), maxAge)
	f.tokens.now = clock
	return f
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1",
			Labels: map[string]string{"b": "two", "a": `o"ne`}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "runner",
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		},
	}
}

func files(v *Volume) map[string]string {
	out := map[string]string{}
	for _, f := range v.Files {
		out[f.Path] = fmt.Sprintf("%s %#o", f.Data, f.Mode)
	}
	return out
}

func TestResolveKinds(t *testing.T) {
	cms, secrets := listers(t,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"},
			Data: map[string]string{"mode": "fast", "level": "3"}, BinaryData: map[string][]byte{"blob": {1, 2}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "frozen"}, Immutable: ptr.To(true),
			Data: map[string]string{"x": "y"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cret")}},
	)
	f := newTokenFake(0)
	tokens := f.tokens
	r := &Resolver{ConfigMaps: cms, Secrets: secrets, Tokens: tokens}

	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "all", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "items", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
			Items:                []corev1.KeyToPath{{Key: "mode", Path: "conf/mode.txt", Mode: ptr.To[int32](0o600)}, {Key: "level", Path: "level"}}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		{Name: "gone", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope", Optional: ptr.To(true)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		}}}},
		{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "frozen"},
					Items: []corev1.KeyToPath{{Key: "x", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			}}}},
	}
	got, err := r.Resolve(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"all":             {"mode": "fast 0400", "level": "3 0400", "blob": "\x01\x02 0400"},
		"items":           {"conf/mode.txt": "fast 0600", "level": "3 0644"},
		"secret":          {"password": "s3cret 0644"},
		"gone":            {},
		"info":            {"labels": "a=\"o\\\"ne\"\nb=\"two\" 0644", "name": "web 0644", "mem": "64 0644"},
		"kube-api-access": {"token": "token-1-for-runner 0644", "ca.crt": "y 0644", "namespace": "ns 0644"},
	}
	if len(got.Volumes) != len(want) {
		t.Errorf("resolved %d volumes, want %d (emptyDir is not resolved)", len(got.Volumes), len(want))
	}
	for name, w := range want {
		v := got.Volume(name)
		if v == nil {
			t.Errorf("volume %s not resolved", name)
			continue
		}
		if g := files(v); fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("volume %s: got %q, want %q", name, g, w)
		}
	}
	if f, ok := got.Volume("items").File("conf/mode.txt"); !ok || string(f.Data) != "fast" {
		t.Errorf("File(conf/mode.txt) = %v %v", f, ok)
	}
	if fmt.Sprint(got.Sources) != "[ConfigMap/settings Secret/creds Secret/nope]" {
		t.Errorf("sources %v: want the mutable objects read, the missing optional one too, not the immutable one", got.Sources)
	}
	if len(f.requests) != 1 {
		t.Fatalf("%d token requests", len(f.requests))
	}
	ref := f.requests[0].Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.Name != "web" || ref.UID != "uid-1" || len(f.requests[0].Spec.Audiences) != 0 ||
		*f.requests[0].Spec.ExpirationSeconds != 3607 {
		t.Errorf("token request %+v", f.requests[0].Spec)
	}
	// 80% of 3607s.
	if want := f.now.Add(3607 * time.Second * 8 / 10); !got.RefreshAt.Equal(want) {
		t.Errorf("RefreshAt %s, want %s", got.RefreshAt, want)
	}
	sum := got.Sum()
	again, err := r.Resolve(context.Background(), pod)
	if err != nil || again.Sum() != sum || len(f.requests) != 1 {
		t.Errorf("a second resolve before the refresh time must reuse the token: %v, %d requests", err, len(f.requests))
	}
	// Every pod of a namespace names the same sources: kept once.
	for i := range got.Sources {
		if unsafe.StringData(again.Sources[i]) != unsafe.StringData(got.Sources[i]) {
			t.Errorf("source %q is a copy in the second resolution, want the first's string", again.Sources[i])
		}
	}
}

func TestTokenRenewal(t *testing.T) {
	f := newTokenFake(time.Hour)
	tokens := f.tokens
	pod := testPod()
	get := func(exp int64) Token {
		tok, err := tokens.Get(context.Background(), pod, "vault", exp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := get(600)
	if !first.RefreshAt.Equal(f.now.Add(480*time.Second)) || f.requests[0].Spec.Audiences[0] != "vault" {
		t.Fatalf("a 600s token is due at 80%%: %s", first.RefreshAt.Sub(f.now))
	}
	f.now = f.now.Add(479 * time.Second)
	if get(600) != first {
		t.Error("renewed before 80% of its lifetime")
	}
	f.now = f.now.Add(time.Second)
	second := get(600)
	if second == first || len(f.requests) != 2 {
		t.Error("not renewed at 80% of its lifetime")
	}
	long := get(48 * 3600)
	if !long.RefreshAt.Equal(f.now.Add(time.Hour)) {
		t.Errorf("a 48h token is due at the maximum age: %s", long.RefreshAt.Sub(f.now))
	}
	if get(600) != second || get(48*3600) != long || len(f.requests) != 3 {
		t.Errorf("a pod's two projections do not each keep their token: %d requests", len(f.requests))
	}
	tokens.Forget(pod.UID)
	get(600)
	if len(f.requests) != 4 {
		t.Errorf("a forgotten pod's token was reused: %d requests", len(f.requests))
	}
}

// TestTokensOnRead: with TokensOnRead, resolving a pod's token volume asks
// for no token; the first read does, later reads share it until it is due
// for renewal, and its renewals are not changes of the contents.
func TestTokensOnRead(t *testing.T) {
	f := newTokenFake(time.Hour)
	tokens := f.tokens
	r := Resolver{Tokens: tokens, TokensOnRead: true}
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "vault", ExpirationSeconds: ptr.To[int64](600), Path: "./token"}}}}}}}
	ctx := context.Background()
	contents, err := r.Resolve(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 0 || !contents.RefreshAt.IsZero() {
		t.Fatalf("resolving requested %d tokens and set RefreshAt %v; want none until read", len(f.requests), contents.RefreshAt)
	}
	file, ok := contents.Volumes[0].File("token")
	if !ok || file.Data != "" || file.Token == nil || file.Mode != DefaultMode {
		t.Fatalf("token file %+v, want one to read", file)
	}
	sum := contents.Sum()
	read := func() string {
		t.Helper()
		data, err := file.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	first := read()
	if first != "token-1-for-runner" || len(f.requests) != 1 {
		t.Fatalf("first read %q after %d requests", first, len(f.requests))
	}
	if req := f.requests[0]; req.Spec.Audiences[0] != "vault" || *req.Spec.ExpirationSeconds != 600 || req.Spec.BoundObjectRef.UID != pod.UID {
		t.Errorf("token requested as %+v", req.Spec)
	}
	f.now = f.now.Add(479 * time.Second)
	if read() != first || len(f.requests) != 1 {
		t.Error("a read before 80% of the token's lifetime requested another")
	}
	f.now = f.now.Add(time.Second)
	if second := read(); second == first || len(f.requests) != 2 {
		t.Errorf("the read at 80%% of its lifetime got %q after %d requests; want a renewed token", second, len(f.requests))
	}
	if contents.Sum() != sum {
		t.Error("a renewal changed the contents' digest")
	}
	if plain := (File{Path: "a", Data: "x"}); func() string { d, _ := plain.Read(ctx); return d }() != "x" {
		t.Error("Read of a plain file is not its Data")
	}
}

func TestResolveErrors(t *testing.T) {
	cms, secrets := listers(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}, Data: map[string]string{"a": "1"}})
	r := &Resolver{ConfigMaps: cms, Secrets: secrets}
	for _, tc := range []struct {
		name    string
		source  corev1.VolumeSource
		missing bool
		want    string
	}{
		{"missing configmap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}},
			true, `volume "v": configmap "nope" not found`},
		{"missing key", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
			Items: []corev1.KeyToPath{{Key: "b", Path: "b"}}}}, true, "couldn't find key b in ConfigMap ns/settings"},
		{"missing secret", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}, true, `secret "creds" not found`},
		{"token without a client", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}, false, "no token client configured"},
		{"cluster trust bundle", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca.pem"}}}}}, false, "only configMap, secret, downwardAPI and serviceAccountToken"},
		{"bad field", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "x", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}}}}, false, "unsupported fieldPath: spec.nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: tc.source}}
			_, err := r.Resolve(context.Background(), pod)
			var missing *MissingError
			var invalid *InvalidError
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.As(err, &missing) != tc.missing || (!tc.missing && !errors.As(err, &invalid)) {
				t.Errorf("got %v, want an error with %q (missing: %v)", err, tc.want, tc.missing)
			}
		})
	}
}
