package resolver

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFingerprintFields changes each field of a navigation in turn, down
// to the fields of its links, rows, copies and versions (those JSON would
// show: the exported ones), and checks that the fingerprint changes: a
// field added to navigation and left out of fingerprint fails here, where
// it would have served a page's old ETag for its new place.
func TestFingerprintFields(t *testing.T) {
	full := func() *navigation {
		nav := &navigation{}
		fillValue(reflect.ValueOf(nav).Elem())
		return nav
	}
	base := fingerprint(full())
	if got := fingerprint(full()); got != base {
		t.Fatalf("fingerprint of the same navigation = %s, then %s", base, got)
	}
	if fingerprint(&navigation{}) == base {
		t.Fatal("an empty navigation has the fingerprint of a full one")
	}
	var paths []string
	walkLeaves(reflect.ValueOf(full()).Elem(), "nav", func(path string, _ reflect.Value) { paths = append(paths, path) })
	if len(paths) < 40 {
		t.Fatalf("only %d fields found: %v", len(paths), paths)
	}
	for _, path := range paths {
		nav := full()
		walkLeaves(reflect.ValueOf(nav).Elem(), "nav", func(p string, v reflect.Value) {
			if p == path {
				changeValue(v)
			}
		})
		if fingerprint(nav) == base {
			t.Errorf("changing %s leaves the fingerprint as it was", path)
		}
	}
	// A string's end moving to the next one changes it too.
	a, b := full(), full()
	a.List, a.Month = "ab", "c"
	b.List, b.Month = "a", "bc"
	if fingerprint(a) == fingerprint(b) {
		t.Error("fingerprint(List ab, Month c) = fingerprint(List a, Month bc)")
	}
}

// fillValue sets every exported field under v: a string "x", a number 1,
// true, a date, a pointer to a filled value, a slice of one.
func fillValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillValue(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillValue(v.Index(0))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2014, 3, 3, 10, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i))
			}
		}
	}
}

// walkLeaves calls f with each exported leaf under v and its path: a
// string, number, bool or date, and each pointer and slice itself.
func walkLeaves(v reflect.Value, path string, f func(string, reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		f(path, v)
		if !v.IsNil() {
			walkLeaves(v.Elem(), path+"*", f)
		}
	case reflect.Slice:
		f(path, v)
		for i := range v.Len() {
			walkLeaves(v.Index(i), path+"[]", f)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			f(path, v)
			return
		}
		for i := range v.NumField() {
			if fd := v.Type().Field(i); fd.IsExported() {
				walkLeaves(v.Field(i), path+"."+fd.Name, f)
			}
		}
	default:
		f(path, v)
	}
}

// changeValue changes a leaf of walkLeaves: a pointer to nil, a slice to
// two elements, a date by a second, the others to another value.
func changeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.Repeat(v.String(), 2) + "y")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		v.SetZero()
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
	case reflect.Struct: // time.Time
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second)))
	}
}
