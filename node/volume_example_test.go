package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// dirProvider is an echoProvider that writes its pods' volume files under
// a directory, one sub-directory per pod and volume, as a provider backed
// by real containers would before starting them.
type dirProvider struct {
	echoProvider
	root    string
	created chan struct{}
}

func (p *dirProvider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	defer close(p.created)
	return p.echoProvider.CreatePod(ctx, pod)
}

func (p *dirProvider) SetPodVolumes(_ context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	for _, v := range contents.Volumes {
		for _, f := range v.Files {
			name := filepath.Join(p.root, string(pod.UID), v.Name, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(name, []byte(f.Data), os.FileMode(f.Mode)); err != nil {
				return err
			}
			fmt.Printf("wrote %s/%s %q mode %#o\n", v.Name, f.Path, f.Data, f.Mode)
		}
	}
	return nil
}

// A provider implementing PodVolumeHandler gets the files of its pods'
// configMap, secret, downwardAPI and projected volumes before CreatePod, and
// again whenever they change.
func ExamplePodVolumeHandler() {
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data: map[string]string{"mode": "fast"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello", UID: "uid-1"},
		Spec: corev1.PodSpec{NodeName: "vk0",
			Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, DefaultMode: new(int32(0o640))}}}},
		},
	}
	client := fake.NewClientset(settings, pod)
	factory := informers.NewSharedInformerFactory(client, 0)
	root, _ := os.MkdirTemp("", "volumes")
	defer os.RemoveAll(root)
	provider := &dirProvider{root: root, created: make(chan struct{})}

	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:         client.CoreV1(),
		PodInformer:       factory.Core().V1().Pods(),
		ConfigMapInformer: factory.Core().V1().ConfigMaps(),
		EventRecorder:     record.NewFakeRecorder(10),
		Provider:          provider,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go pc.Run(ctx, 1) //nolint:errcheck
	factory.Start(ctx.Done())
	<-pc.Ready()
	<-provider.created

	// A change to the ConfigMap reaches the provider.
	settings.Data["mode"] = "slow"
	_, _ = client.CoreV1().ConfigMaps("default").Update(ctx, settings, metav1.UpdateOptions{})
	file := filepath.Join(root, "uid-1", "config", "mode")
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(file)
		return string(data) == "slow", nil
	})
	cancel()
	<-pc.Done()
	factory.Shutdown()
	// Output:
	// wrote config/mode "fast" mode 0640
	// create default/hello with A=b
	// wrote config/mode "slow" mode 0640
}
