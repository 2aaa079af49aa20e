package invariant

import (
	"github.com/specsync/specsync/pkg/store"
)

func (c *checker) instances() {
	for _, id := range sortedKeys(c.s.Instances) {
		inst := c.s.Instances[id]
		doc := store.InstancesCollection + "/" + id
		if inst.ID != id {
			c.add("instance-id", doc, "id field %q is not the document id", inst.ID)
		}
		if _, ok := c.s.Specs[inst.SpecID]; !ok {
			c.add("instance-spec", doc, "points at spec %s, which is not stored", inst.SpecID)
		}
		if err := store.CheckParametersDigest(inst.ParametersDigest); err != nil {
			c.add("parameters-digest", doc, "%v", err)
		}
	}
}

func (c *checker) bindings() {
	per := map[string]int64{}
	for _, path := range sortedKeys(c.s.Bindings) {
		b := c.s.Bindings[path]
		per[b.InstanceDocID]++
		if b.ID != b.DocID || b.InstanceID != b.InstanceDocID {
			c.add("binding-id", path, "id field %q and instance_id %q are not the document's %q and %q", b.ID, b.InstanceID, b.DocID, b.InstanceDocID)
		}
		if err := store.CheckParametersDigest(b.ParametersDigest); err != nil {
			c.add("parameters-digest", path, "%v", err)
		}
		inst, ok := c.s.Instances[b.InstanceDocID]
		if !ok {
			c.add("binding-instance", path, "instance %s is not stored: the binding outlived it", b.InstanceDocID)
			continue
		}
		if b.SpecID != inst.SpecID {
			c.add("binding-spec", path, "is of service %s, its instance of %s", b.SpecID, inst.SpecID)
		}
	}
	for _, id := range sortedKeys(c.s.Instances) {
		doc := store.InstancesCollection + "/" + id
		if per[id] > store.MaxBindingsPerInstance {
			c.add("binding-counter", doc, "%d bindings, more than the %d an instance may have", per[id], store.MaxBindingsPerInstance)
		}
	}
	for _, id := range sortedKeys(c.s.Tombstones) {
		t := c.s.Tombstones[id]
		if id != t.DocID() || (t.Kind != store.TombstoneInstance && t.Kind != store.TombstoneBinding) {
			c.add("tombstone", store.TombstonesCollection+"/"+id, "a %q tombstone of instance %q binding %q is stored as %q", t.Kind, t.InstanceID, t.BindingID, id)
		}
		if !t.ExpiresAt.After(t.DeletedAt) {
			c.add("tombstone", store.TombstonesCollection+"/"+id, "expires at %v, not after it was written (%v)", t.ExpiresAt, t.DeletedAt)
		}
	}
}
