//go:build !vk_strategicpatch

// Package smpatch builds the strategic merge patch between two values of one
// Kubernetes API type by walking the Go types, as
// strategicpatch.CreateTwoWayMergePatch does with two JSON documents, but
// without marshalling both values and decoding them again into maps: only
// the fields that changed are encoded. The pod controller writes every
// status change this way, so this is on its hottest path.
//
// It reads the same struct tags (json, patchStrategy, patchMergeKey) and
// compares values as their JSON would compare (times to the second). What it
// does not model (retainKeys, merge lists of scalars, interfaces, duplicate
// merge keys) is reported as ErrUnsupported when such a field changed, so
// the caller can fall back to the JSON round trip.
package smpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrUnsupported reports a change to a field whose patch this package does
// not build.
var ErrUnsupported = errors.New("smpatch: field kind not supported")

// Diff returns the members of the strategic merge patch that turns *old
// into *new, as a JSON object; "{}" when nothing a patch can carry changed.
func Diff[T any](old, new *T) ([]byte, error) {
	if old == nil || new == nil {
		return nil, errors.New("smpatch: a nil value has no patch")
	}
	o, n := reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem()
	if o.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %s is not a struct", ErrUnsupported, o.Type())
	}
	var b bytes.Buffer
	if err := diffStruct(&b, o, n); err != nil {
		return nil, err
	}
	if b.Len() == 0 {
		return []byte("{}"), nil
	}
	return b.Bytes(), nil
}

// diffStruct writes the patch of two structs of one type to b as a JSON
// object, or nothing when they do not differ.
func diffStruct(b *bytes.Buffer, o, n reflect.Value) error {
	obj := object{b: b}
	for _, f := range fieldsOf(o.Type()) {
		if err := diffField(&obj, f, o.Field(f.index), n.Field(f.index)); err != nil {
			return err
		}
	}
	obj.close()
	return nil
}

func diffField(obj *object, f *field, o, n reflect.Value) error {
	oe, ne := f.empty(o), f.empty(n)
	switch {
	case oe && ne:
		return nil
	case ne:
		obj.member(f.name).WriteString("null")
		return nil
	case oe:
		return encode(obj.member(f.name), n)
	}
	if f.unsupported != "" {
		if equal(o, n) {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrUnsupported, f.unsupported)
	}
	if f.mergeKey != "" {
		return diffMergeList(obj, f, o, n)
	}
	return diffValue(obj, f.name, o, n)
}

// diffValue writes name's patch: the new value for leaves and atomic lists,
// the recursive patch for structs and maps.
func diffValue(obj *object, name string, o, n reflect.Value) error {
	for o.Kind() == reflect.Pointer && !isLeaf(o.Type()) {
		if o.IsNil() || n.IsNil() {
			if o.IsNil() && n.IsNil() {
				return nil
			}
			if n.IsNil() {
				obj.member(name).WriteString("null")
				return nil
			}
			return encode(obj.member(name), n)
		}
		o, n = o.Elem(), n.Elem()
	}
	switch {
	case isLeaf(o.Type()) || o.Kind() == reflect.Slice || o.Kind() == reflect.Array:
		if equal(o, n) {
			return nil
		}
		return encode(obj.member(name), n)
	case o.Kind() == reflect.Struct:
		return diffNested(obj, name, diffStruct, o, n)
	case o.Kind() == reflect.Map && o.Type().Key().Kind() == reflect.String:
		return diffNested(obj, name, diffMap, o, n)
	}
	if equal(o, n) {
		return nil
	}
	return fmt.Errorf("%w: %s of kind %s", ErrUnsupported, name, o.Kind())
}

// diffNested writes name's patch of an object, when it has one.
func diffNested(obj *object, name string, diff func(*bytes.Buffer, reflect.Value, reflect.Value) error, o, n reflect.Value) error {
	var sub bytes.Buffer
	if err := diff(&sub, o, n); err != nil {
		return err
	}
	if sub.Len() > 0 {
		obj.member(name).Write(sub.Bytes())
	}
	return nil
}

// diffMap writes the patch of two string-keyed maps: changed and new keys,
// and null for removed ones.
func diffMap(b *bytes.Buffer, o, n reflect.Value) error {
	obj := object{b: b}
	keys := n.MapKeys()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, k := range keys {
		nv, ov := n.MapIndex(k), o.MapIndex(k)
		if !ov.IsValid() {
			if err := encode(obj.member(k.String()), nv); err != nil {
				return err
			}
			continue
		}
		if leafOf(nv.Type()) == leafByValue {
			// Compared as they are (quantities: every status's resources).
			if err := diffValue(&obj, k.String(), ov, nv); err != nil {
				return err
			}
			continue
		}
		// Map values are not addressable: copy them so that leaves can be
		// compared through pointers.
		oc, nc := reflect.New(ov.Type()).Elem(), reflect.New(nv.Type()).Elem()
		oc.Set(ov)
		nc.Set(nv)
		if err := diffValue(&obj, k.String(), oc, nc); err != nil {
			return err
		}
	}
	for _, k := range o.MapKeys() {
		if !n.MapIndex(k).IsValid() {
			obj.member(k.String()).WriteString("null")
		}
	}
	obj.close()
	return nil
}

// diffMergeList writes the patch of a list merged by key: changed and new
// elements, a delete directive for each removed one, and the order of the
// new list, as CreateTwoWayMergePatch writes it.
func diffMergeList(obj *object, f *field, o, n reflect.Value) error {
	oldKeys := make([]string, o.Len())
	oldAt := make(map[string]int, o.Len())
	for i := range o.Len() {
		k, err := f.keyOf(o.Index(i))
		if err != nil {
			return err
		}
		if _, dup := oldAt[k]; dup {
			return fmt.Errorf("%w: %s has %s %s twice", ErrUnsupported, f.name, f.mergeKey, k)
		}
		oldAt[k], oldKeys[i] = i, k
	}
	var list bytes.Buffer
	list.WriteByte('[')
	keys := make([]string, n.Len())
	inNew := make(map[string]bool, n.Len())
	for i := range n.Len() {
		ne := n.Index(i)
		k, err := f.keyOf(ne)
		if err != nil {
			return err
		}
		if inNew[k] {
			return fmt.Errorf("%w: %s has %s %s twice", ErrUnsupported, f.name, f.mergeKey, k)
		}
		inNew[k], keys[i] = true, k
		j, ok := oldAt[k]
		if !ok {
			separate(&list)
			if err := encode(&list, ne); err != nil {
				return err
			}
			continue
		}
		var sub bytes.Buffer
		if err := diffStruct(&sub, o.Index(j), ne); err != nil {
			return err
		}
		if sub.Len() > 0 {
			separate(&list)
			// The element's own patch, with the key that finds it.
			list.WriteByte('{')
			writeKey(&list, f.mergeKey, k)
			list.WriteByte(',')
			list.Write(sub.Bytes()[1:])
		}
	}
	for _, k := range oldKeys {
		if !inNew[k] {
			separate(&list)
			list.WriteString(`{"$patch":"delete",`)
			writeKey(&list, f.mergeKey, k)
			list.WriteByte('}')
		}
	}
	// With no element to patch, the list may still have been reordered:
	// then the order directive alone is the patch.
	reordered := false
	for i, k := range keys {
		reordered = reordered || oldAt[k] != i
	}
	if list.Len() == 1 && !reordered {
		return nil
	}
	order := obj.member("$setElementOrder/" + f.name)
	order.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			order.WriteByte(',')
		}
		order.WriteByte('{')
		writeKey(order, f.mergeKey, k)
		order.WriteByte('}')
	}
	order.WriteByte(']')
	if list.Len() > 1 {
		list.WriteByte(']')
		obj.member(f.name).Write(list.Bytes())
	}
	return nil
}

func separate(list *bytes.Buffer) {
	if list.Len() > 1 {
		list.WriteByte(',')
	}
}

// object writes a JSON object's members as they come, opening it with the
// first and leaving nothing when there is none.
type object struct {
	b      *bytes.Buffer
	opened bool
}

// member writes name's key and returns the buffer for its value.
func (w *object) member(name string) *bytes.Buffer {
	if w.opened {
		w.b.WriteByte(',')
	} else {
		w.b.WriteByte('{')
		w.opened = true
	}
	writeString(w.b, name)
	w.b.WriteByte(':')
	return w.b
}

func (w *object) close() {
	if w.opened {
		w.b.WriteByte('}')
	}
}

func encode(b *bytes.Buffer, v reflect.Value) error {
	data, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	b.Write(data)
	return nil
}

// field is what a patch needs to know of one struct field.
type field struct {
	index     int
	name      string
	omitEmpty bool
	// mergeKey is the JSON name of the key of a list merged by key, and
	// keyIndex its field in the element.
	mergeKey string
	keyIndex int
	// unsupported says why this field's changes cannot be patched here.
	unsupported string
}

var fieldCache sync.Map // reflect.Type → []*field

// fieldsOf returns t's fields as JSON encodes them.
func fieldsOf(t reflect.Type) []*field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]*field)
	}
	var fs []*field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		f := &field{index: i, name: name, omitEmpty: hasOption(opts, "omitempty")}
		switch {
		case sf.Anonymous:
			f.unsupported = "embedded field " + sf.Name
		case hasOption(opts, "omitzero") || hasOption(opts, "inline"):
			f.unsupported = "field " + name + " with " + opts
		}
		f.setStrategy(sf)
		fs = append(fs, f)
	}
	fieldCache.Store(t, fs)
	return fs
}

func (f *field) setStrategy(sf reflect.StructField) {
	strategy := sf.Tag.Get("patchStrategy")
	if strategy == "" || f.unsupported != "" {
		return
	}
	if strategy != "merge" {
		f.unsupported = fmt.Sprintf("%s with patch strategy %q", f.name, strategy)
		return
	}
	elem := sf.Type
	if elem.Kind() != reflect.Slice || elem.Elem().Kind() != reflect.Struct {
		f.unsupported = f.name + ": a merge list whose elements are not structs"
		return
	}
	key := sf.Tag.Get("patchMergeKey")
	for _, ef := range fieldsOf(elem.Elem()) {
		if ef.name == key && isScalar(elem.Elem().Field(ef.index).Type.Kind()) {
			f.mergeKey, f.keyIndex = key, ef.index
			return
		}
	}
	f.unsupported = fmt.Sprintf("%s: merge key %q is not a scalar field of its elements", f.name, key)
}

func hasOption(opts, want string) bool {
	for opt := range strings.SplitSeq(opts, ",") {
		if opt == want {
			return true
		}
	}
	return false
}

// keyOf returns the merge key of element e as JSON.
func (f *field) keyOf(e reflect.Value) (string, error) {
	k := e.Field(f.keyIndex)
	if k.Kind() == reflect.String {
		var b bytes.Buffer
		writeString(&b, k.String())
		return b.String(), nil
	}
	j, err := json.Marshal(k.Interface())
	return string(j), err
}

// writeString writes s as a JSON string, by hand when it needs no escaping.
func writeString(b *bytes.Buffer, s string) {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			b.Write(j)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// writeKey writes the member that names a merge list's element: the merge
// key and k, its value already in JSON.
func writeKey(b *bytes.Buffer, key, k string) {
	writeString(b, key)
	b.WriteByte(':')
	b.WriteString(k)
}

// empty reports whether v leaves the field out of its JSON, or null.
func (f *field) empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Map, reflect.Slice:
		return v.IsNil() || (f.omitEmpty && v.Len() == 0)
	}
	if t, ok := asTime(v); ok {
		return t.IsZero()
	}
	return f.omitEmpty && v.IsZero() && isScalar(v.Kind())
}

func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// leafKind says whether values of a type are compared and written whole,
// and whether that needs their address.
type leafKind int

const (
	notLeaf leafKind = iota
	// leafByValue: scalars, and types whose MarshalJSON takes the value
	// (times, quantities): a map's values compare without copies.
	leafByValue
	// leafByPointer: types whose MarshalJSON takes a pointer.
	leafByPointer
)

var leafCache sync.Map // reflect.Type → leafKind

func leafOf(t reflect.Type) leafKind {
	if isScalar(t.Kind()) {
		return leafByValue
	}
	if k, ok := leafCache.Load(t); ok {
		return k.(leafKind)
	}
	k := notLeaf
	switch {
	case t.Implements(marshalerType):
		k = leafByValue
	case reflect.PointerTo(t).Implements(marshalerType):
		k = leafByPointer
	}
	leafCache.Store(t, k)
	return k
}

// isLeaf reports whether values of t are compared and written whole:
// scalars, and types with their own JSON form (times, quantities).
func isLeaf(t reflect.Type) bool { return leafOf(t) != notLeaf }

func asTime(v reflect.Value) (*metav1.Time, bool) {
	if v.Type() != reflect.TypeFor[metav1.Time]() || !v.CanAddr() {
		return nil, false
	}
	return v.Addr().Interface().(*metav1.Time), true
}

// equal reports whether a and b, of one type, have the same JSON. Times
// compare to the second, as they are written.
func equal(a, b reflect.Value) bool {
	if ta, ok := asTime(a); ok {
		tb, _ := asTime(b)
		return ta.IsZero() == tb.IsZero() && ta.Unix() == tb.Unix()
	}
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equal(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if !isLeaf(a.Type()) {
			for _, f := range fieldsOf(a.Type()) {
				fa, fb := a.Field(f.index), b.Field(f.index)
				ea, eb := f.empty(fa), f.empty(fb)
				if ea != eb || (!ea && !equal(fa, fb)) {
					return false
				}
			}
			return true
		}
	}
	// Maps, floats, and types with their own JSON form: compare the JSON.
	aj, errA := jsonOf(a)
	bj, errB := jsonOf(b)
	return errA == nil && errB == nil && bytes.Equal(aj, bj)
}

// jsonOf is v's JSON to compare: a type's own form as its MarshalJSON
// writes it (json.Marshal would only check and compact it, at several times
// the cost: resource quantities are compared on every status write), or
// json.Marshal's.
func jsonOf(v reflect.Value) ([]byte, error) {
	if m, ok := v.Interface().(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	if v.CanAddr() {
		if m, ok := v.Addr().Interface().(json.Marshaler); ok {
			return m.MarshalJSON()
		}
	}
	return json.Marshal(v.Interface())
}
