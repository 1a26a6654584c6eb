package kubernetes

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	pspolicy "k8s.io/pod-security-admission/policy"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// systemPrefix is the prefix of the provider's own labels and annotations
// in B; A's annotations under it never cross.
const systemPrefix = "virtual-kubelet.io/"

// podPolicy decides what of A's pod may cross to B. Its refusals are
// errdefs.InvalidInput: the pod ends Failed (ProviderRejected) in A with the
// message, which names the field.
type podPolicy struct {
	level              psapi.LevelVersion
	evaluator          pspolicy.Evaluator
	volumeTypes        map[string]bool
	annotationPrefixes []string
	runtimeClasses     map[string]string
}

// newPodPolicy builds the policy of a validated config.
func newPodPolicy(cfg *Config) (*podPolicy, error) {
	level, err := psapi.ParseLevel(cfg.PodSecurity)
	if err != nil {
		return nil, fmt.Errorf("podSecurity: %w", err)
	}
	evaluator, err := pspolicy.NewEvaluator(pspolicy.DefaultChecks(), nil)
	if err != nil {
		return nil, err
	}
	volumeTypes := map[string]bool{}
	for _, v := range cfg.VolumeTypes {
		volumeTypes[v] = true
	}
	return &podPolicy{
		level:              psapi.LevelVersion{Level: level, Version: psapi.LatestVersion()},
		evaluator:          evaluator,
		volumeTypes:        volumeTypes,
		annotationPrefixes: cfg.AnnotationPrefixes,
		runtimeClasses:     cfg.RuntimeClasses,
	}, nil
}

// check refuses B's pod when it fails the Pod Security Standards level or
// has a volume of a type not allowed to cross.
func (pp *podPolicy) check(remote *corev1.Pod) error {
	for _, v := range remote.Spec.Volumes {
		if t := volumeType(&v.VolumeSource); !pp.volumeTypes[t] {
			return errdefs.InvalidInputf("spec.volumes[%s]: volume type %s may not cross to the remote cluster (allowed: %s)", v.Name, t, strings.Join(slices.Sorted(maps.Keys(pp.volumeTypes)), ", "))
		}
		if v.Projected == nil {
			continue
		}
		for i, s := range v.Projected.Sources {
			if s.ConfigMap == nil && s.Secret == nil && s.DownwardAPI == nil {
				return errdefs.InvalidInputf("spec.volumes[%s].projected.sources[%d]: only configMap, secret and downwardAPI sources may cross to the remote cluster", v.Name, i)
			}
		}
	}
	results := pp.evaluator.EvaluatePod(pp.level, &remote.ObjectMeta, &remote.Spec)
	if agg := pspolicy.AggregateCheckResults(results); !agg.Allowed {
		return errdefs.InvalidInputf("violates PodSecurity %q of the remote cluster's provider: %s", pp.level.String(), agg.ForbiddenDetail())
	}
	return nil
}

// runtimeClass maps A's runtimeClassName to B's; a class not in the map is
// refused rather than dropped, which would run the pod on B's default
// runtime in place of the sandbox A asked for.
func (pp *podPolicy) runtimeClass(name *string) (*string, error) {
	if name == nil {
		return nil, nil
	}
	to, ok := pp.runtimeClasses[*name]
	if !ok {
		return nil, errdefs.InvalidInputf("spec.runtimeClassName: %q has no counterpart in the remote cluster (the provider config's runtimeClasses)", *name)
	}
	return &to, nil
}

// annotations returns those of A's annotations allowed to cross.
func (pp *podPolicy) annotations(from map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range from {
		if strings.HasPrefix(k, systemPrefix) {
			continue
		}
		for _, prefix := range pp.annotationPrefixes {
			if strings.HasPrefix(k, prefix) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// volumeType is the field name of the volume's source, as in a pod spec
// (hostPath, persistentVolumeClaim, ...), or "" for none.
func volumeType(v *corev1.VolumeSource) string {
	val := reflect.ValueOf(v).Elem()
	for i := range val.NumField() {
		if !val.Field(i).IsNil() {
			return jsonName(val.Type().Field(i))
		}
	}
	return ""
}

// volumeTypeNames are the names of all volume sources.
func volumeTypeNames() map[string]bool {
	t := reflect.TypeFor[corev1.VolumeSource]()
	out := map[string]bool{}
	for i := range t.NumField() {
		out[jsonName(t.Field(i))] = true
	}
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
