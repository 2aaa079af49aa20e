package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	"cloud.google.com/go/firestore"
)

// An OSB context is any JSON object a platform sends, and Firestore's map
// values are not: an array in an array, a key "" or "__name__", or more
// than 20 levels of nesting are refused by Firestore itself. So an
// instance or binding keeps its context as canonical JSON text (keys
// sorted, numbers as sent) in context_json, which Firestore takes
// whatever it holds. Records written before kept it as a map in context:
// they are read as they are (the map), and rewritten as text by the next
// update that writes them. Readers see one field either way, Context.

// ContextSize is the size of ctx as stored (its canonical JSON).
func ContextSize(ctx map[string]any) int {
	b, err := contextText(ctx)
	if err != nil {
		return 0
	}
	return len(b)
}

// contextText is the canonical JSON of a context ("" for none).
func contextText(ctx map[string]any) (string, error) {
	if ctx == nil {
		return "", nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ctx); err != nil {
		return "", fmt.Errorf("encode the context: %w", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// parseContext reads a stored context: the text when there is one, else
// the map of a record from before the text was kept.
func parseContext(text string, legacy map[string]any) (map[string]any, error) {
	if text == "" {
		return legacy, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("context_json is not a JSON object: %w", err)
	}
	return m, nil
}

// DecodeContext fills Context from what was stored; every read of an
// instance or a binding calls it: the store's through finish (txGet,
// queryAll, dataTo), the invariant checker's itself.
func (i *Instance) DecodeContext() error {
	ctx, err := parseContext(i.ContextJSON, i.LegacyContext)
	if err != nil {
		return fmt.Errorf("instance %s: %w", i.ID, err)
	}
	i.Context = ctx
	return nil
}

// encodeContext sets the stored fields from Context: the text, never the
// old map (a rewrite of an old record moves it to the text).
func (i *Instance) encodeContext() error {
	text, err := contextText(i.Context)
	i.ContextJSON, i.LegacyContext = text, nil
	return err
}

// DecodeContext is Instance.DecodeContext's for a binding.
func (b *Binding) DecodeContext() error {
	ctx, err := parseContext(b.ContextJSON, b.LegacyContext)
	if err != nil {
		return fmt.Errorf("binding %s of instance %s: %w", b.ID, b.InstanceID, err)
	}
	b.Context = ctx
	return nil
}

func (b *Binding) encodeContext() error {
	text, err := contextText(b.Context)
	b.ContextJSON, b.LegacyContext = text, nil
	return err
}

// decoder is a record that finishes its decoding after DataTo.
type decoder interface{ DecodeContext() error }

// finish completes the decoding of a record read into v.
func finish(v any) error {
	if d, ok := v.(decoder); ok {
		return d.DecodeContext()
	}
	return nil
}

// dataTo decodes a document into v (a pointer) and finishes it.
func dataTo(snap *firestore.DocumentSnapshot, v any) error {
	if err := snap.DataTo(v); err != nil {
		return err
	}
	return finish(v)
}
