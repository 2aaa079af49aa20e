package web

// The strict part of DecodeBody. encoding/json matches a body's keys to a
// struct's fields without regard to case ({"SERVICE_ID": ...} fills
// ServiceID) and lets a repeated key overwrite the one before: two ways a
// body says something other than what the server reads, as a repeated
// query parameter would (checkQuery refuses that). So before a body is
// taken, its keys are checked: a key that differs from a field's name only
// by case, or that appears twice in one object (after JSON's escapes are
// decoded, so "a" and "\u0061" are one key), is refused with the place it
// was found.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// keyFrame is one open object or array of the body being checked.
type keyFrame struct {
	object bool
	// typ is what the object or array decodes into: a struct's field
	// names are exact; a map, json.RawMessage or any keep every key.
	typ reflect.Type
	// name is where it is in the object around it (its key), or elem
	// its index in the array around it. Paths are joined only for an
	// error: a path per frame would cost the square of the depth.
	name     string
	elem     int
	seen     map[string]bool
	key      string // the key whose value comes next (objects)
	wantsKey bool
	index    int // the next element (arrays)
}

// checkKeys checks the keys of body (one valid JSON value) against what
// it decodes into (t, a struct or anything else).
func checkKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	// Numbers as written: a float64 would fail on one of any size (1e400,
	// which a context may hold) and end the check there.
	dec.UseNumber()
	var stack []*keyFrame
	for {
		tok, err := dec.Token()
		if err != nil {
			// Decode took the body, so this is not expected; refused
			// rather than taken unchecked.
			return fmt.Errorf("the request body's keys could not be read: %v", err)
		}
		var top *keyFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantsKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil
				}
				valueDone(stack)
				continue
			}
			key := tok.(string)
			if top.seen[key] {
				return fmt.Errorf("key %s is given twice in %s: give it once", Quote(key), where(stack))
			}
			top.seen[key] = true
			if name, ok := foldedField(top.typ, key); ok {
				return fmt.Errorf("key %s in %s is not %q: field names are case-sensitive", Quote(key), where(stack), name)
			}
			top.key, top.wantsKey = key, false
			continue
		}
		// A value: of the key just read, of an array's next element, or
		// the body itself.
		var child keyFrame
		if top == nil {
			child.typ = t
		} else if top.object {
			child.typ, child.name = fieldType(top.typ, top.key), top.key
		} else {
			child.typ, child.elem = elemType(top.typ), top.index
		}
		switch tok {
		case json.Delim('{'):
			child.object, child.seen, child.wantsKey = true, map[string]bool{}, true
			stack = append(stack, &child)
		case json.Delim('['):
			stack = append(stack, &child)
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone(stack)
		default:
			valueDone(stack)
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

// valueDone moves the innermost open object or array past a value.
func valueDone(stack []*keyFrame) {
	if len(stack) == 0 {
		return
	}
	top := stack[len(stack)-1]
	if top.object {
		top.wantsKey = true
	} else {
		top.index++
	}
}

// where names the innermost open object of stack by its path (keys
// joined by dots, [i] for an element), at most 64 bytes of it.
func where(stack []*keyFrame) string {
	var b strings.Builder
	for i, f := range stack[1:] {
		if !stack[i].object {
			fmt.Fprintf(&b, "[%d]", f.elem)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.name)
	}
	switch path := b.String(); {
	case path == "":
		return "the request body"
	case len(path) > 64:
		return Quote(path)
	default:
		return path
	}
}

// indirect is t without its pointers (nil stays nil).
func indirect(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// structFields are a struct's JSON names with their fields' types, and
// the names by their lower case (for foldedField).
type structFields struct {
	types  map[string]reflect.Type
	folded map[string]string
}

// fieldsCache holds each struct type's structFields: a body's keys are
// looked up once each, and reflection over a struct is not cheap.
var fieldsCache sync.Map // reflect.Type -> *structFields

// jsonFields are struct t's fields by JSON name (t is a struct type).
func jsonFields(t reflect.Type) *structFields {
	if f, ok := fieldsCache.Load(t); ok {
		return f.(*structFields)
	}
	out := &structFields{types: map[string]reflect.Type{}, folded: map[string]string{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out.types[name] = f.Type
		out.folded[foldKey(name)] = name
	}
	fieldsCache.Store(t, out)
	return out
}

// fieldType is the type the value of key decodes into within t (nil:
// anything, or kept raw).
func fieldType(t reflect.Type, key string) reflect.Type {
	t = indirect(t)
	if t == nil || t == rawMessage {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return indirect(jsonFields(t).types[key])
	case reflect.Map:
		return indirect(t.Elem())
	}
	return nil
}

// elemType is the type an element of an array decodes into within t.
func elemType(t reflect.Type) reflect.Type {
	t = indirect(t)
	if t == nil || t == rawMessage {
		return nil
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		return indirect(t.Elem())
	}
	return nil
}

// foldedField reports the field of struct t that key names only by
// another case (encoding/json would fill it).
func foldedField(t reflect.Type, key string) (string, bool) {
	t = indirect(t)
	if t == nil || t == rawMessage || t.Kind() != reflect.Struct {
		return "", false
	}
	fields := jsonFields(t)
	if _, exact := fields.types[key]; exact {
		return "", false
	}
	name, ok := fields.folded[foldKey(key)]
	return name, ok
}

// foldKey is s with each rune replaced by the smallest of its case
// folding orbit: two strings strings.EqualFold calls equal (which is how
// encoding/json matches a key to a field: "ſervice_id", with a long s,
// fills service_id) have the same foldKey, where lower-casing would miss
// the long s and the Kelvin sign.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}
