//go:build e2e

package volumes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

// TestPodFilesThroughKubectl is what a newcomer tries on the mock: read the
// pod's service-account token, ca.crt and namespace, and a ConfigMap file
// with kubectl exec, see a ConfigMap update arrive, kubectl cp both ways,
// and kubectl debug -it into an ephemeral container. The mock in process
// reads tokens on read, so its pod's token is issued when first read; a
// plugin gets the files with the tokens in them, issued before the pod
// starts.
func TestPodFilesThroughKubectl(t *testing.T) {
	daemontest.ForEachTransport(t, testPodFilesThroughKubectl)
}

func testPodFilesThroughKubectl(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, true)
	ctx := context.Background()

	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Data: map[string]string{"index.html": "version 1\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: corev1.PodSpec{
			NodeName: d.Name, Tolerations: daemontest.Tolerate,
			Volumes: []corev1.Volume{{Name: "site", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "site"}}}}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", VolumeMounts: []corev1.VolumeMount{
				{Name: "site", MountPath: "/usr/share/nginx/html"},
				{Name: "site", MountPath: "/etc/index.html", SubPath: "index.html"},
			}}},
		},
	}
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "hello", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// A token issued from here on says so in its issue time, to the second.
	running := time.Now()
	time.Sleep(time.Until(running.Truncate(time.Second).Add(time.Second)))

	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	token := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", sa+"token")
	issuedOnRead := issuedAt(t, token) > running.Unix()
	if want := via.Name == "in-process"; issuedOnRead != want {
		t.Errorf("token issued at %d, the pod Running at %s: issued on read %v, want %v", issuedAt(t, token), running.Format(time.RFC3339Nano), issuedOnRead, want)
	}
	tr, err := c.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := tr.Status.User
	if !tr.Status.Authenticated || u.Username != "system:serviceaccount:"+ns+":default" ||
		fmt.Sprint(u.Extra["authentication.kubernetes.io/pod-name"]) != "[hello]" ||
		fmt.Sprint(u.Extra["authentication.kubernetes.io/pod-uid"]) != fmt.Sprintf("[%s]", created.UID) {
		t.Errorf("the token read through kubectl exec is not the default service account's bound to the pod: %+v", tr.Status)
	}
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", sa+"namespace"); out != ns {
		t.Errorf("namespace file: %q", out)
	}
	rootCA, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", sa+"ca.crt"); out != rootCA.Data["ca.crt"] {
		t.Errorf("ca.crt is not the cluster's CA:\n%s", out)
	}
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", "/usr/share/nginx/html/index.html"); out != "version 1\n" {
		t.Errorf("ConfigMap file: %q", out)
	}

	// The ConfigMap changes: the mounted file follows, the subPath mount
	// keeps what it started with (as on a kubelet).
	changed := time.Now()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "site"},
		Data: map[string]string{"index.html": "version 2\n"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "updated file visible through exec", func() (bool, string) {
		out, err := c.Kubectl(ctx, "-n", ns, "exec", "hello", "--", "cat", "/usr/share/nginx/html/index.html")
		return err == nil && out == "version 2\n", fmt.Sprint(out, err)
	})
	t.Logf("ConfigMap change to file content visible through kubectl exec: %s", time.Since(changed).Round(time.Millisecond))
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", "/etc/index.html"); out != "version 1\n" {
		t.Errorf("a subPath mount must keep its first contents: %q", out)
	}

	// kubectl cp in, and out: a copied file and the mounted directory.
	local := t.TempDir()
	in := filepath.Join(local, "notes.txt")
	if err := os.WriteFile(in, []byte("copied in\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	daemontest.Kubectl(t, c, "-n", ns, "cp", in, "hello:/tmp/notes.txt")
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "hello", "--", "cat", "/tmp/notes.txt"); out != "copied in\n" {
		t.Errorf("file copied in: %q", out)
	}
	daemontest.Kubectl(t, c, "-n", ns, "cp", "hello:/tmp/notes.txt", filepath.Join(local, "back.txt"))
	if data, err := os.ReadFile(filepath.Join(local, "back.txt")); err != nil || string(data) != "copied in\n" {
		t.Errorf("file copied out: %q %v", data, err)
	}
	daemontest.Kubectl(t, c, "-n", ns, "cp", "hello:/usr/share/nginx/html", filepath.Join(local, "html"))
	if data, err := os.ReadFile(filepath.Join(local, "html", "index.html")); err != nil || string(data) != "version 2\n" {
		t.Errorf("mounted directory copied out: %q %v", data, err)
	}

	// kubectl debug -it adds an ephemeral container (the API server bumps
	// the pod's generation, so it reaches UpdatePod); the session gets the
	// mock's shell, whose exit code ends the container.
	debug := c.KubectlCommand(ctx, "-n", ns,
		"debug", "-it", "hello", "--image=busybox", "--container=dbg")
	debug.Stdin = strings.NewReader("hostname\necho hello from debug\nexit 3\n")
	out, err := debug.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello\n") || !strings.Contains(string(out), "hello from debug\n") {
		t.Fatalf("kubectl debug -it: %v\n%s", err, out)
	}
	p := daemontest.WaitPod(t, c.Client, ns, "hello", "debug container exited", func(p *corev1.Pod) bool {
		s := p.Status.EphemeralContainerStatuses
		return len(s) == 1 && s[0].Name == "dbg" && s[0].State.Terminated != nil
	})
	if code := p.Status.EphemeralContainerStatuses[0].State.Terminated.ExitCode; code != 3 || p.Status.Phase != corev1.PodRunning {
		t.Errorf("debug container exit code %d (want 3), pod %s", code, p.Status.Phase)
	}

	// No automounting, no token.
	plain := pod.DeepCopy()
	plain.Name, plain.Spec.Volumes, plain.Spec.Containers[0].VolumeMounts = "plain", nil, nil
	plain.Spec.AutomountServiceAccountToken = ptr.To(false)
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "plain", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if out, err := c.Kubectl(ctx, "-n", ns, "exec", "plain", "--", "cat", sa+"token"); err == nil || !strings.Contains(out, "No such file") {
		t.Errorf("automountServiceAccountToken: false, yet a token: %v %q", err, out)
	}
}

// issuedAt is the issue time (iat, Unix seconds) in a service-account
// token's claims.
func issuedAt(t *testing.T, token string) int64 {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		IssuedAt int64 `json:"iat"`
	}
	if err == nil {
		err = json.Unmarshal(payload, &claims)
	}
	if err != nil || claims.IssuedAt == 0 {
		t.Fatalf("the token's claims %q: %v", payload, err)
	}
	return claims.IssuedAt
}
