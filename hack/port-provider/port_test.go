//go:build e2e

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// portFixture copies the prior-idiom provider, its go.mod naming the prior
// module, ports it with the tool alone and builds it offline; it returns
// the binary.
func portFixture(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	// go.sum: the provider's checksums. It requires the versions this module
	// does, so this module's go.sum has them all, and the build needs
	// nothing beyond the module cache.
	for from, to := range map[string]string{
		"testdata/provider/main.go.txt": "main.go",
		"testdata/provider/go.mod.txt":  "go.mod",
		filepath.Join(root, "go.sum"):   "go.sum",
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-w", "-replace", root, dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("port-provider -w exited %d:\n%s", code, stderr.String())
	}
	// Eight imports, and in go.mod the requirement and the replace.
	if n := strings.Count(stderr.String(), " -> "); n != 10 {
		t.Errorf("port-provider reported %d changes, want 10:\n%s", n, stderr.String())
	}
	for _, name := range []string{"main.go", "go.mod"} {
		ported, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(ported, []byte(priorModule)) {
			t.Fatalf("the ported %s still mentions %s:\n%s", name, priorModule, ported)
		}
	}
	bin := filepath.Join(dir, "provider")
	build := exec.Command("go", append(append([]string{"build"}, childproc.BuildFlags()...), "-o", bin, ".")...)
	build.Dir = dir
	// The module proxy stays on: the ported go.mod's graph names module
	// versions (go-logr/logr v1.2.2) this module's pruned graph never
	// downloads, so a fresh module cache does not have them.
	build.Env = append(os.Environ(), childproc.GoFlagsEnv("-mod=mod"), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the ported provider: %v\n%s", err, out)
	}
	return bin
}

// TestPortedProviderRunsAgainstTheControlPlane: a provider written for the
// prior project, ported by rewriting its imports only, registers its node,
// runs a pod, serves logs and exec through the API server, and its pods get
// the env-reference events of the prior project.
func TestPortedProviderRunsAgainstTheControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	bin := portFixture(t)
	c := testcluster.Shared(t)
	host := c.AddHost(t, "ported")
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host.Addr.String(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	name := testcluster.UniqueName("ported")
	// One writer for both pipes: exec.Cmd then writes from one goroutine;
	// the test reads it while the provider runs.
	var output childproc.Output
	cmd := host.Command(context.Background(), bin, "--nodename", name, "--kubeconfig", c.Info.NodeKubeconfig,
		"--listen", host.Addr.String()+":10250", "--cert", certFile, "--key", keyFile, "--client-ca", c.Info.CAFile)
	cmd.Stdout, cmd.Stderr = &output, &output
	proc, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if proc.Stop(20 * time.Second) {
			t.Error("the ported provider did not exit within 20s of SIGTERM")
		}
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if t.Failed() { // the process has exited: output is complete
			t.Logf("ported provider output:\n%s", output.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	poll(t, ctx, "node registered with the provider's label, and Ready", func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || n.Labels["type"] != "virtual-kubelet" {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})

	ns := c.Namespace(t)
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"GREETING": "hello from a ported provider"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{"user": []byte("admin")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// One pod whose optional references are all missing: it runs.
	ok := pod(name, "ok",
		cmRef("GREETING", "settings", "GREETING", false),
		cmRef("OPT_CM", "absent", "x", true),
		cmRef("OPT_CM_KEY", "settings", "absent", true),
		secretRef("OPT_SECRET", "absent", "x", true),
		secretRef("OPT_SECRET_KEY", "creds", "absent", true),
		secretRef("USER", "creds", "user", false))
	// One pod per kind of missing mandatory reference: they stay Pending.
	mandatory := map[string]*corev1.Pod{
		"MandatoryConfigMapNotFound":    pod(name, "m-cm", cmRef("X", "absent", "x", false)),
		"MandatoryConfigMapKeyNotFound": pod(name, "m-cm-key", cmRef("X", "settings", "absent", false)),
		"MandatorySecretNotFound":       pod(name, "m-secret", secretRef("X", "absent", "x", false)),
		"MandatorySecretKeyNotFound":    pod(name, "m-secret-key", secretRef("X", "creds", "absent", false)),
	}
	for _, p := range append([]*corev1.Pod{ok}, values(mandatory)...) {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	poll(t, ctx, "pod ok Running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "ok", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	logs, err := c.Kubectl(ctx, "logs", "-n", ns, "ok")
	if err != nil || !strings.Contains(logs, "GREETING=hello from a ported provider\n") || !strings.Contains(logs, "USER=admin\n") {
		t.Errorf("kubectl logs: %v\n%s", err, logs)
	}
	if strings.Contains(logs, "OPT_") {
		t.Errorf("kubectl logs: missing optional references must be skipped:\n%s", logs)
	}
	execOut, err := c.Kubectl(ctx, "exec", "-n", ns, "ok", "--", "echo", "ported", "fine")
	if err != nil || strings.TrimSpace(execOut) != "ported fine" {
		t.Errorf("kubectl exec: %v\n%s", err, execOut)
	}
	// The adapters are in use: entries go to the provider's logrus logger
	// with its field, a span's fields reach the log, and the provider's
	// spans reach the OpenTelemetry SDK.
	for what, words := range map[string][]string{
		"the pod's creation logged with its span's field": {`msg="pod created"`, "provider=memory", "pod=" + ns + "/ok"},
		"the CreatePod span ended in the SDK":             {`msg="span ended"`, "provider=memory", "span=memProvider.CreatePod"},
	} {
		poll(t, ctx, what, func(context.Context) (bool, error) { return hasLine(output.String(), words...), nil })
	}

	want := map[string]string{ // reason -> pod
		"OptionalConfigMapNotFound":    "ok",
		"OptionalConfigMapKeyNotFound": "ok",
		"OptionalSecretNotFound":       "ok",
		"OptionalSecretKeyNotFound":    "ok",
	}
	for reason, p := range mandatory {
		want[reason] = p.Name
	}
	var missing []string
	poll(t, ctx, "env reference events", func(ctx context.Context) (bool, error) {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && want[e.Reason] == e.InvolvedObject.Name {
				seen[e.Reason] = true
			}
		}
		missing = missing[:0]
		for reason := range want {
			if !seen[reason] {
				missing = append(missing, reason)
			}
		}
		return len(missing) == 0, nil
	}, func() string { return fmt.Sprintf("events missing: %v", missing) })
	for _, p := range mandatory {
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s with a missing mandatory reference: phase %v, err %v; want Pending", p.Name, got.Status.Phase, err)
		}
	}
}

// hasLine reports whether a line of out contains all words.
func hasLine(out string, words ...string) bool {
	for line := range strings.Lines(out) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

func pod(nodeName, name string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1", Env: env}},
		},
	}
}

func cmRef(name, cm, key string, optional bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key, Optional: ptr.To(optional)}}}
}

func secretRef(name, secret, key string, optional bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: ptr.To(optional)}}}
}

func values(m map[string]*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// poll waits for cond, failing the test with what and, if given, detail.
func poll(t *testing.T, ctx context.Context, what string, cond func(context.Context) (bool, error), detail ...func() string) {
	t.Helper()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		msg := fmt.Sprintf("waiting for %s: %v", what, err)
		for _, d := range detail {
			msg += "; " + d()
		}
		t.Fatal(msg)
	}
}
