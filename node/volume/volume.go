// Package volume resolves the files of a pod's volumes the way the kubelet
// writes them, so a provider can hand them to its containers.
//
// Resolved kinds: configMap, secret, downwardAPI and projected (with its
// configMap, secret, downwardAPI and serviceAccountToken sources). Items,
// defaultMode and per-item mode, and optional are applied as the kubelet
// applies them; a missing mandatory ConfigMap, Secret or key is a
// *MissingError. Every other volume kind (emptyDir, persistentVolumeClaim,
// hostPath, image, csi, ephemeral, ...) is not resolved: it is left in the
// pod's spec for the provider to handle as it sees fit. A projected
// clusterTrustBundle or podCertificate source is not resolved either (both
// are beta APIs, off by default in Kubernetes 1.36): Resolve reports it as
// an *InvalidError, so such a pod stays Pending instead of starting with a
// file missing.
//
// subPath is a property of a container's volumeMount, not of the volume: a
// provider mounting path P of a volume with subPath S serves the file (or
// directory) S of the volume at P. As on a kubelet, subPath mounts see the
// contents as of the container's start and are not updated afterwards.
package volume

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/internal/podenv"
	"github.com/vkubelet/virtual-kubelet/node/podspec"
)

// DefaultMode is the mode of a file whose volume sets no defaultMode and
// whose item sets no mode (0644), as the API server defaults it.
const DefaultMode int32 = 0o644

// MissingError says a mandatory ConfigMap, Secret or key a volume refers to
// does not exist. The pod cannot start until it does.
type MissingError = podenv.MissingError

// InvalidError says a volume cannot be resolved whatever exists in the
// cluster (an unsupported source, a lister that is not configured).
type InvalidError = podenv.InvalidError

// File is one file of a volume.
type File struct {
	// Path is relative to the volume's root, slash-separated, never
	// starting with "/" or containing "..".
	Path string
	// Data is the file's content. A string, so the files of many pods
	// share the bytes of the ConfigMap or token they came from. It is
	// empty for a token requested on read (Token set): use Read.
	Data string
	// Mode holds the file's permission bits.
	Mode int32
	// Token, set only when the Resolver has TokensOnRead, is the
	// service-account token this file holds, requested when it is read.
	Token *TokenSource
}

// Read returns the file's content: Data, or for a token requested on read,
// the token as of now (which asks the API server for one the first time
// and once the last is due for renewal).
func (f File) Read(ctx context.Context) (string, error) {
	if f.Token == nil {
		return f.Data, nil
	}
	tok, err := f.Token.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", f.Path, err)
	}
	return tok.Token, nil
}

// Volume is the resolved content of one of the pod's volumes.
type Volume struct {
	// Name is the volume's name in the pod's spec.
	Name string
	// Files are sorted by Path.
	Files []File
}

// File returns the file at p (relative to the volume's root).
func (v *Volume) File(p string) (File, bool) {
	i := sort.Search(len(v.Files), func(i int) bool { return v.Files[i].Path >= p })
	if i < len(v.Files) && v.Files[i].Path == p {
		return v.Files[i], true
	}
	return File{}, false
}

// Contents are the resolved volumes of a pod.
type Contents struct {
	// Volumes holds the resolved volumes in the order of the pod's spec;
	// volumes of other kinds are not in it.
	Volumes []Volume
	// RefreshAt is when the earliest service-account token in the volumes
	// is due for renewal (zero without tokens, or with tokens requested on
	// read, which renew themselves): the kubelet renews a token at 80% of
	// its lifetime, or once it is 24 hours old.
	RefreshAt time.Time
	// Sources name the mutable ConfigMaps and Secrets the volumes were
	// read from, as "ConfigMap/NAME" or "Secret/NAME". A change to one of
	// them changes the contents; immutable objects are not listed, since
	// the kubelet does not update volumes from them.
	Sources []string
}

// Volume returns the volume called name, or nil if it is not resolved.
func (c *Contents) Volume(name string) *Volume {
	for i := range c.Volumes {
		if c.Volumes[i].Name == name {
			return &c.Volumes[i]
		}
	}
	return nil
}

// Sum is a digest of the files (paths, modes and data), to tell whether
// contents changed without keeping them. A token requested on read counts
// by its path and mode alone: its renewals are not changes to deliver.
func (c *Contents) Sum() [sha256.Size]byte {
	h := sha256.New()
	for _, v := range c.Volumes {
		fmt.Fprintf(h, "%q\n", v.Name)
		for _, f := range v.Files {
			fmt.Fprintf(h, "%q %o %d\n", f.Path, f.Mode, len(f.Data))
			_, _ = io.WriteString(h, f.Data) // a hash.Hash never fails to write
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// IsResolved reports whether Resolve produces the files of v; the others
// are the provider's to handle.
func IsResolved(v *corev1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// Resolver reads what a pod's volumes refer to.
type Resolver struct {
	// ConfigMaps and Secrets read the objects volumes refer to. A nil
	// lister makes a volume of that kind an *InvalidError.
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	// Tokens issues service-account tokens; without it a
	// serviceAccountToken projection is an *InvalidError.
	Tokens *Tokens
	// TokensOnRead makes token files a File.Token to read, not a token
	// requested now, for a reader that needs them rarely if ever (a
	// simulator): a pod then costs no TokenRequest until it is read.
	TokensOnRead bool
	// Node, if set, returns the node the pod runs on: a downward API
	// limits.* reference to a limit the container does not set resolves to
	// the node's allocatable amount.
	Node func() *corev1.Node
}

// Resolve returns the files of pod's configMap, secret, downwardAPI and
// projected volumes.
func (r *Resolver) Resolve(ctx context.Context, pod *corev1.Pod) (*Contents, error) {
	res := &resolution{r: r, ctx: ctx, pod: pod, out: &Contents{}}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !IsResolved(v) {
			continue
		}
		files, err := res.volume(v)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
		res.out.Volumes = append(res.out.Volumes, Volume{Name: v.Name, Files: files})
	}
	sort.Strings(res.out.Sources)
	return res.out, nil
}

// resolution is the state of one Resolve call.
type resolution struct {
	r    *Resolver
	ctx  context.Context
	pod  *corev1.Pod
	out  *Contents
	node *corev1.Node
	// nodeRead is set once r.Node was asked, so it is asked once per pod.
	nodeRead bool
}

func (res *resolution) volume(v *corev1.Volume) ([]File, error) {
	switch {
	case v.ConfigMap != nil:
		s := v.ConfigMap
		return res.object("ConfigMap", s.Name, s.Items, s.Optional, modeOr(s.DefaultMode, DefaultMode))
	case v.Secret != nil:
		s := v.Secret
		return res.object("Secret", s.SecretName, s.Items, s.Optional, modeOr(s.DefaultMode, DefaultMode))
	case v.DownwardAPI != nil:
		return res.downwardAPI(v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, DefaultMode))
	}
	return res.projected(v.Projected)
}

func (res *resolution) projected(p *corev1.ProjectedVolumeSource) ([]File, error) {
	mode := modeOr(p.DefaultMode, DefaultMode)
	// A source is most often one file (a service account's token, CA and
	// namespace): the files are kept as long as the pod.
	files := make([]File, 0, len(p.Sources))
	for i, src := range p.Sources {
		var more []File
		var err error
		switch {
		case src.ConfigMap != nil:
			more, err = res.object("ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, mode)
		case src.Secret != nil:
			more, err = res.object("Secret", src.Secret.Name, src.Secret.Items, src.Secret.Optional, mode)
		case src.DownwardAPI != nil:
			more, err = res.downwardAPI(src.DownwardAPI.Items, mode)
		case src.ServiceAccountToken != nil:
			more, err = res.token(src.ServiceAccountToken, mode)
		default:
			err = &InvalidError{Msg: fmt.Sprintf("projected source %d: only configMap, secret, downwardAPI and serviceAccountToken sources are supported", i)}
		}
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// object returns the files of a ConfigMap or Secret: every key, or the
// items' keys at their paths.
func (res *resolution) object(kind, name string, items []corev1.KeyToPath, optional *bool, mode int32) ([]File, error) {
	obj, err := podenv.Objects{ConfigMaps: res.r.ConfigMaps, Secrets: res.r.Secrets}.Get(kind, res.pod.Namespace, name, true)
	if err != nil {
		return nil, err
	}
	// A missing optional object is a source too: its creation fills the volume.
	if obj == nil || !obj.Immutable {
		// Every pod of a namespace names the same sources: one string each.
		if source := intern.String(kind + "/" + name); !slices.Contains(res.out.Sources, source) {
			res.out.Sources = append(res.out.Sources, source)
		}
	}
	isOptional := optional != nil && *optional
	if obj == nil {
		if isOptional {
			return nil, nil
		}
		return nil, &MissingError{Kind: kind, Namespace: res.pod.Namespace, Name: name}
	}
	data := obj.Data
	if len(items) == 0 {
		files := make([]File, 0, len(data))
		for k, v := range data {
			files = append(files, File{Path: k, Data: v, Mode: mode})
		}
		return files, nil
	}
	files := make([]File, 0, len(items))
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isOptional {
				continue
			}
			return nil, &MissingError{Kind: kind, Namespace: res.pod.Namespace, Name: name, Key: it.Key}
		}
		files = append(files, File{Path: cleanPath(it.Path), Data: v, Mode: modeOr(it.Mode, mode)})
	}
	return files, nil
}

// downwardAPI returns the files of downward API items: pod fields, with
// whole label and annotation maps one `key="value"` line each, and
// container resources.
func (res *resolution) downwardAPI(items []corev1.DownwardAPIVolumeFile, mode int32) ([]File, error) {
	files := make([]File, 0, len(items))
	for _, it := range items {
		var value string
		var err error
		switch {
		case it.FieldRef != nil:
			value, err = res.field(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			value, err = res.resource(it.ResourceFieldRef)
		default:
			err = &InvalidError{Msg: fmt.Sprintf("downward API file %q: neither fieldRef nor resourceFieldRef", it.Path)}
		}
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: cleanPath(it.Path), Data: value, Mode: modeOr(it.Mode, mode)})
	}
	return files, nil
}

func (res *resolution) field(fieldPath string) (string, error) {
	switch fieldPath {
	case "metadata.labels":
		return formatMap(res.pod.Labels), nil
	case "metadata.annotations":
		return formatMap(res.pod.Annotations), nil
	}
	return podenv.FieldValue(res.pod, fieldPath, res.nodeOnce())
}

func (res *resolution) resource(ref *corev1.ResourceFieldSelector) (string, error) {
	for _, c := range podspec.AllContainers(res.pod) {
		if c.Name != ref.ContainerName {
			continue
		}
		var allocatable corev1.ResourceList
		if node := res.nodeOnce(); node != nil {
			allocatable = node.Status.Allocatable
			if len(allocatable) == 0 {
				allocatable = node.Status.Capacity
			}
		}
		return podenv.ResourceValue(c, ref, allocatable)
	}
	return "", &InvalidError{Msg: fmt.Sprintf("resourceFieldRef: no container %q", ref.ContainerName)}
}

func (res *resolution) nodeOnce() *corev1.Node {
	if !res.nodeRead && res.r.Node != nil {
		res.node = res.r.Node()
	}
	res.nodeRead = true
	return res.node
}

// formatMap writes a label or annotation map as the kubelet does: sorted
// `key="value"` lines, the value quoted as Go quotes strings.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

func (res *resolution) token(p *corev1.ServiceAccountTokenProjection, mode int32) ([]File, error) {
	if res.r.Tokens == nil {
		return nil, &InvalidError{Msg: "serviceAccountToken: no token client configured"}
	}
	expiration := int64(3600)
	if p.ExpirationSeconds != nil {
		expiration = *p.ExpirationSeconds
	}
	if res.r.TokensOnRead {
		return []File{{Path: cleanPath(p.Path), Mode: mode, Token: res.r.Tokens.OnRead(res.pod, p.Audience, expiration)}}, nil
	}
	tok, err := res.r.Tokens.Get(res.ctx, res.pod, p.Audience, expiration)
	if err != nil {
		return nil, fmt.Errorf("serviceAccountToken: %w", err)
	}
	if res.out.RefreshAt.IsZero() || tok.RefreshAt.Before(res.out.RefreshAt) {
		res.out.RefreshAt = tok.RefreshAt
	}
	return []File{{Path: cleanPath(p.Path), Data: tok.Token, Mode: mode}}, nil
}

func modeOr(m *int32, def int32) int32 {
	if m != nil {
		return *m
	}
	return def
}

// cleanPath normalises an item's path; the API server has already refused
// absolute paths and "..".
func cleanPath(p string) string { return path.Clean(p) }
