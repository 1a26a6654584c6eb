package podenv

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Objects reads the ConfigMaps and Secrets a pod refers to, for its
// environment and its volumes alike. A nil lister makes every read of that
// kind an *InvalidError.
type Objects struct {
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
}

// ObjectData is what a pod can read of a ConfigMap or Secret.
type ObjectData struct {
	// Data is the object's values as strings.
	Data map[string]string
	// Immutable is the object's immutable field.
	Immutable bool
}

// Get reads ConfigMap or Secret (kind) namespace/name; nil when it does not
// exist, never nil Data when it does. A ConfigMap's binaryData is included with binary (volumes have it,
// env does not); its data alone is the informer's own map, not a copy.
func (o Objects) Get(kind, namespace, name string, binary bool) (*ObjectData, error) {
	switch kind {
	case "ConfigMap":
		if o.ConfigMaps == nil {
			return nil, noLister(kind, name)
		}
		cm, err := o.ConfigMaps.ConfigMaps(namespace).Get(name)
		if err != nil {
			return nil, notFoundIsNil(err)
		}
		d := &ObjectData{Data: cm.Data, Immutable: cm.Immutable != nil && *cm.Immutable}
		if d.Data == nil || binary && len(cm.BinaryData) > 0 {
			d.Data = make(map[string]string, len(cm.Data)+len(cm.BinaryData))
			for k, v := range cm.Data {
				d.Data[k] = v
			}
			for k, v := range cm.BinaryData {
				d.Data[k] = string(v)
			}
		}
		return d, nil
	case "Secret":
		if o.Secrets == nil {
			return nil, noLister(kind, name)
		}
		s, err := o.Secrets.Secrets(namespace).Get(name)
		if err != nil {
			return nil, notFoundIsNil(err)
		}
		d := &ObjectData{Data: make(map[string]string, len(s.Data)), Immutable: s.Immutable != nil && *s.Immutable}
		for k, v := range s.Data {
			d.Data[k] = string(v)
		}
		return d, nil
	}
	return nil, &InvalidError{Msg: fmt.Sprintf("%s %q: not a ConfigMap or Secret", kind, name)}
}

func noLister(kind, name string) error {
	return &InvalidError{Msg: fmt.Sprintf("%s %q: no %s lister configured", strings.ToLower(kind), name, kind)}
}

// notFoundIsNil drops a NotFound error: the object does not exist, which
// Get reports as nil data.
func notFoundIsNil(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
