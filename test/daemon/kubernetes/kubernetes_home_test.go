//go:build e2e

package kubernetes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

// envTokenRenewal set makes TestKubernetesProviderHomeIdentity wait for a
// token's renewal in B: 8 minutes, the shortest a token may live (600 s)
// being renewed at 80% of its life.
const envTokenRenewal = "VK_TOKEN_RENEWAL"

// tokenExpiry is the exp claim of a JWT (read, not verified: A's
// TokenReview verifies).
func tokenExpiry(t *testing.T, token string) time.Time {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token of %d parts, want a JWT's 3", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		t.Fatalf("token claims %s: no exp (%v)", payload, err)
	}
	return time.Unix(claims.Exp, 0)
}

// TestKubernetesProviderHomeIdentity: an offloaded pod whose spec mounts
// service-account tokens reads, in B, tokens of A for its own service
// account (the kube-api-access one, and one of its own audience and
// expiry), with A's CA and namespace, at the same paths, and
// KUBERNETES_SERVICE_HOST/PORT name A's API server from the config. A's
// TokenReview accepts the tokens as the pod's service account until the
// pod is deleted in A, then rejects them. In B the tokens are in one
// Secret, owned by B's pod (gone with it) and due for renewal at 80% of
// the shorter token's life; no other Secret of B holds them. With
// VK_TOKEN_RENEWAL set, the pod's token is seen renewed before it expires.
func TestKubernetesProviderHomeIdentity(t *testing.T) {
	// A's API server as node hosts, where B's pods run here, reach it.
	home, err := url.Parse(testcluster.Shared(t).Info.NodeServer)
	if err != nil {
		t.Fatal(err)
	}
	tc := startTwoClustersWith(t, fmt.Sprintf("home: {apiServer: %q}\n", home.String()))
	ctx := context.Background()

	if _, err := tc.a.Client.CoreV1().ServiceAccounts(tc.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const vaultPath = "/var/run/secrets/vault"
	pod := tc.pod("caller", corev1.Container{Name: "app", Image: "busybox",
		VolumeMounts: []corev1.VolumeMount{{Name: "vault-token", MountPath: vaultPath, ReadOnly: true}}})
	pod.Spec.ServiceAccountName = "robot"
	pod.Spec.Volumes = []corev1.Volume{{Name: "vault-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "vault", ExpirationSeconds: ptr.To[int64](600), Path: "token"}}},
	}}}}
	tc.create(t, pod)
	running := daemontest.WaitPod(t, tc.a.Client, tc.ns, pod.Name, "Running", isRunning)

	exec := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := tc.kubectl("", append([]string{"exec", pod.Name, "--"}, args...)...)
		if err != nil {
			t.Fatalf("kubectl exec %v: %v\n%s", args, err, out)
		}
		return out
	}
	review := func(t *testing.T, token string, audiences ...string) *authenticationv1.TokenReviewStatus {
		t.Helper()
		tr, err := tc.a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &tr.Status
	}
	const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	wantUser := "system:serviceaccount:" + tc.ns + ":robot"
	var apiToken, vaultToken string

	t.Run("the pod in B reads tokens A accepts as its service account", func(t *testing.T) {
		apiToken = strings.TrimSpace(exec(t, "cat", saDir+"/token"))
		if s := review(t, apiToken); !s.Authenticated || s.User.Username != wantUser {
			t.Fatalf("A's TokenReview of the kube-api-access token: authenticated %v as %q (%s)", s.Authenticated, s.User.Username, s.Error)
		} else if names := s.User.Extra["authentication.kubernetes.io/pod-uid"]; len(names) != 1 || names[0] != string(running.UID) {
			t.Errorf("the token is bound to pod %v, want %s", names, running.UID)
		}
		vaultToken = strings.TrimSpace(exec(t, "cat", vaultPath+"/token"))
		if s := review(t, vaultToken, "vault"); !s.Authenticated || s.User.Username != wantUser || len(s.Audiences) != 1 || s.Audiences[0] != "vault" {
			t.Errorf("A's TokenReview of the vault token for audience vault: authenticated %v as %q, audiences %v (%s)", s.Authenticated, s.User.Username, s.Audiences, s.Error)
		}
		if s := review(t, vaultToken); s.Authenticated {
			t.Errorf("the vault token is accepted for A's API server's audience")
		}
	})

	t.Run("A's CA, namespace and API server", func(t *testing.T) {
		root, err := tc.a.Client.CoreV1().ConfigMaps(tc.ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := exec(t, "cat", saDir+"/ca.crt"); strings.TrimSpace(got) != strings.TrimSpace(root.Data["ca.crt"]) {
			t.Errorf("ca.crt in B is not A's:\n%s", got)
		}
		if got := strings.TrimSpace(exec(t, "cat", saDir+"/namespace")); got != tc.ns {
			t.Errorf("namespace in B: %q, want A's %q", got, tc.ns)
		}
		if got := strings.Fields(exec(t, "printenv", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")); len(got) != 2 || got[0] != home.Hostname() || got[1] != home.Port() {
			t.Errorf("KUBERNETES_SERVICE_HOST/PORT in B: %v, want %s %s", got, home.Hostname(), home.Port())
		}
	})

	t.Run("in B the tokens are in one Secret, owned by the pod and due for renewal", func(t *testing.T) {
		remote := tc.remotePods(t)[pod.Name]
		if len(remote) != 1 {
			t.Fatalf("%d pods in B for %s", len(remote), pod.Name)
		}
		secrets, err := tc.b.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var holders []corev1.Secret
		for _, s := range secrets.Items {
			for _, v := range s.Data {
				if string(v) == apiToken || string(v) == vaultToken {
					holders = append(holders, s)
					break
				}
			}
		}
		if len(holders) != 1 {
			t.Fatalf("%d Secrets of B hold the tokens", len(holders))
		}
		s := holders[0]
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Pod" || s.OwnerReferences[0].UID != remote[0].UID || s.Namespace != remote[0].Namespace {
			t.Errorf("the token Secret %s/%s is owned by %+v, want B's pod %s", s.Namespace, s.Name, s.OwnerReferences, remote[0].UID)
		}
		renewAt, err := time.Parse(time.RFC3339, s.Annotations[k8sprovider.AnnotationRenewAt])
		// The vault token lives 600 s: renewed at 480 s of its life.
		if err != nil || time.Until(renewAt) > 480*time.Second || time.Until(renewAt) < 0 {
			t.Errorf("the token Secret is renewed at %q (%v), want within 480 s of the pod's start", s.Annotations[k8sprovider.AnnotationRenewAt], err)
		}
		for _, v := range remote[0].Spec.Volumes {
			if v.Projected != nil {
				t.Errorf("B's pod has the projected volume %s", v.Name)
			}
		}
	})

	t.Run("the token in the pod is renewed before it expires", func(t *testing.T) {
		if os.Getenv(envTokenRenewal) == "" {
			t.Skipf("set %s=1 to wait for the vault token's renewal (480 s into its 600 s)", envTokenRenewal)
		}
		expires := tokenExpiry(t, vaultToken)
		var renewed string
		daemontest.EventuallyWithin(t, time.Until(expires), "the vault token renewed in the pod in B", func() (bool, string) {
			renewed = strings.TrimSpace(exec(t, "cat", vaultPath+"/token"))
			return renewed != vaultToken, "still the first token, due to expire at " + expires.Format(time.RFC3339)
		})
		if !tokenExpiry(t, renewed).After(expires) {
			t.Errorf("the renewed token expires at %s, not after the first one (%s)", tokenExpiry(t, renewed), expires)
		}
		if s := review(t, renewed, "vault"); !s.Authenticated || s.User.Username != wantUser {
			t.Errorf("A's TokenReview of the renewed token: authenticated %v as %q (%s)", s.Authenticated, s.User.Username, s.Error)
		}
		vaultToken = renewed
	})

	t.Run("deleted in A, the pod's tokens are rejected and its Secret goes", func(t *testing.T) {
		remote := tc.remotePods(t)[pod.Name]
		if err := tc.a.Client.CoreV1().Pods(tc.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		daemontest.WaitGone(t, tc.a.Client, tc.ns, pod.Name, running.UID)
		daemontest.Eventually(t, "A's TokenReview rejects the deleted pod's tokens", func() (bool, string) {
			api, vault := review(t, apiToken), review(t, vaultToken, "vault")
			return !api.Authenticated && !vault.Authenticated, fmt.Sprintf("authenticated: %v, %v", api.Authenticated, vault.Authenticated)
		})
		if len(remote) == 1 {
			daemontest.Eventually(t, "B's pod and its token Secret gone", func() (bool, string) {
				list, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).List(ctx, metav1.ListOptions{LabelSelector: k8sprovider.LabelSourceUID + "=" + string(running.UID)})
				if err != nil {
					return false, err.Error()
				}
				_, podErr := tc.b.Client.CoreV1().Pods(tc.remoteNS).Get(ctx, remote[0].Name, metav1.GetOptions{})
				return len(list.Items) == 0 && apierrors.IsNotFound(podErr), fmt.Sprintf("%d Secrets; pod: %v", len(list.Items), podErr)
			})
		}
	})
}
