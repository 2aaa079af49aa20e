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
)

// keyFrame is one open object or array of the body being checked.
type keyFrame struct {
	object bool
	// typ is what the object or array decodes into: a struct's field
	// names are exact; a map, json.RawMessage or any keep every key.
	typ reflect.Type
	// name is where it is in the object or array around it: its key, or
	// its index as "[i]". Paths are joined only for an error: a path per
	// frame would cost the square of the depth.
	name     string
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
			child.typ, child.name = elemType(top.typ), fmt.Sprintf("[%d]", top.index)
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
	for _, f := range stack[1:] {
		if b.Len() > 0 && !strings.HasPrefix(f.name, "[") {
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

// jsonFields are a struct's JSON names and their fields' types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
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
		out[name] = f.Type
	}
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
		return indirect(jsonFields(t)[key])
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
	if _, exact := fields[key]; exact {
		return "", false
	}
	for name := range fields {
		if strings.EqualFold(name, key) {
			return name, true
		}
	}
	return "", false
}
