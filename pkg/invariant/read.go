package invariant

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"
	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

// ChangeDoc is a changes/{id} document with its id.
type ChangeDoc struct {
	DocID string
	store.Change
}

// BindingDoc is an instances/{id}/bindings/{binding_id} document with the
// ids its path gives it.
type BindingDoc struct {
	InstanceDocID, DocID string
	store.Binding
}

// State is a whole project as read from Firestore.
type State struct {
	Specs     map[string]store.SpecRecord // by document id
	Instances map[string]store.Instance   // by document id
	// Bindings are every instance's bindings, by document path below the
	// database root; a binding whose instance document is gone is here too.
	Bindings   map[string]BindingDoc
	Tombstones map[string]store.Tombstone // by document id
	Registries map[string]store.RegistryStatus
	Changes    []ChangeDoc
	Operations map[string]api.Operation
	// Manifests are the manifest shards, by document id.
	Manifests map[string]store.ManifestShard
	// Catalog is meta/catalog: revision and published.
	Catalog struct {
		Revision  int64 `firestore:"revision"`
		Published int64 `firestore:"published"`
	}
	CatalogExists bool
	// CurrentOperation is what meta/bootstrap names ("" without one).
	CurrentOperation string
	// Raw is every document of every collection (subcollections too), by
	// path, as stored; the secret rule scans it.
	Raw map[string]map[string]any
	// decodeErrors are documents of the known collections that do not
	// decode into their type.
	decodeErrors []Violation
}

// Read reads the whole project.
func Read(ctx context.Context, client *firestore.Client) (*State, error) {
	return read(ctx, client, false)
}

func read(ctx context.Context, client *firestore.Client, shallow bool) (*State, error) {
	s := &State{
		Specs:      map[string]store.SpecRecord{},
		Instances:  map[string]store.Instance{},
		Bindings:   map[string]BindingDoc{},
		Tombstones: map[string]store.Tombstone{},
		Registries: map[string]store.RegistryStatus{},
		Operations: map[string]api.Operation{},
		Manifests:  map[string]store.ManifestShard{},
		Raw:        map[string]map[string]any{},
	}
	cols := client.Collections(ctx)
	for {
		col, err := cols.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invariant: list collections: %w", err)
		}
		if err := s.readCollection(ctx, col, true, shallow); err != nil {
			return nil, err
		}
	}
	sort.Slice(s.Changes, func(i, j int) bool { return s.Changes[i].DocID < s.Changes[j].DocID })
	return s, nil
}

func (s *State) readCollection(ctx context.Context, col *firestore.CollectionRef, top, shallow bool) error {
	snaps, err := col.Documents(ctx).GetAll()
	if err != nil {
		return fmt.Errorf("invariant: read %s: %w", col.Path, err)
	}
	for _, snap := range snaps {
		s.Raw[relPath(snap.Ref)] = snap.Data()
		switch {
		case top:
			s.decode(col.ID, snap)
		case col.ID == store.BindingsCollection && col.Parent != nil && col.Parent.Parent != nil && col.Parent.Parent.ID == store.InstancesCollection:
			var b store.Binding
			err := snap.DataTo(&b)
			if err == nil {
				err = b.DecodeContext()
			}
			if err != nil {
				s.decodeErrors = append(s.decodeErrors, Violation{Rule: "decode", Doc: relPath(snap.Ref), Detail: err.Error()})
				continue
			}
			s.Bindings[relPath(snap.Ref)] = BindingDoc{InstanceDocID: col.Parent.ID, DocID: snap.Ref.ID, Binding: b}
		}
	}
	if shallow {
		return nil
	}
	// Documents that only hold subcollections are not returned by a
	// query; DocumentRefs lists them too.
	refs, err := col.DocumentRefs(ctx).GetAll()
	if err != nil {
		return fmt.Errorf("invariant: list %s: %w", col.Path, err)
	}
	// Asking every document for its subcollections is one call each: a
	// few at a time.
	subs := make([][]*firestore.CollectionRef, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, ref := range refs {
		g.Go(func() error {
			cs, err := ref.Collections(gctx).GetAll()
			if err != nil {
				return fmt.Errorf("invariant: list subcollections of %s: %w", ref.Path, err)
			}
			subs[i] = cs
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, cs := range subs {
		for _, sub := range cs {
			if err := s.readCollection(ctx, sub, false, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// relPath is a document's path below the database root.
func relPath(ref *firestore.DocumentRef) string {
	if i := strings.Index(ref.Path, "/documents/"); i >= 0 {
		return ref.Path[i+len("/documents/"):]
	}
	return ref.Path
}

func (s *State) decode(collection string, snap *firestore.DocumentSnapshot) {
	bad := func(err error) {
		s.decodeErrors = append(s.decodeErrors, Violation{Rule: "decode", Doc: relPath(snap.Ref), Detail: err.Error()})
	}
	id := snap.Ref.ID
	switch collection {
	case store.SpecsCollection:
		var r store.SpecRecord
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		s.Specs[id] = r
	case store.InstancesCollection:
		var r store.Instance
		err := snap.DataTo(&r)
		if err == nil {
			err = r.DecodeContext()
		}
		if err != nil {
			bad(err)
			return
		}
		s.Instances[id] = r
	case store.TombstonesCollection:
		var r store.Tombstone
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		s.Tombstones[id] = r
	case store.RegistriesCollection:
		var r store.RegistryStatus
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		r.Name = id
		s.Registries[id] = r
	case store.ChangesCollection:
		var c store.Change
		if err := snap.DataTo(&c); err != nil {
			bad(err)
			return
		}
		s.Changes = append(s.Changes, ChangeDoc{DocID: id, Change: c})
	case store.ManifestsCollection:
		var m store.ManifestShard
		if err := snap.DataTo(&m); err != nil {
			bad(err)
			return
		}
		s.Manifests[id] = m
	case store.OperationsCollection:
		var op api.Operation
		if err := snap.DataTo(&op); err != nil {
			bad(err)
			return
		}
		s.Operations[id] = op
	case store.MetaCollection:
		switch id {
		case "catalog":
			if err := snap.DataTo(&s.Catalog); err != nil {
				bad(err)
				return
			}
			s.CatalogExists = true
		case "bootstrap":
			if v, err := snap.DataAt("operation"); err == nil && v != nil {
				s.CurrentOperation = fmt.Sprint(v)
			}
		}
	}
}
