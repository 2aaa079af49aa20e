package osb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/spec"
)

// rendered is a Rendered of n services (each description desc bytes)
// through the cache's own render, registry "even" or "odd" by index.
func rendered(tb testing.TB, n, desc int) *Rendered {
	tb.Helper()
	m := &mirror{rev: 7, specs: map[string]*mirrored{}}
	for i := range n {
		s := &spec.Spec{Name: fmt.Sprintf("svc-%05d", i), Description: strings.Repeat("x", desc), Tags: []string{"t"},
			Plans: []spec.Plan{{Name: "small", Description: "small"}}}
		spec.AssignIDs(s, "r")
		reg := "even"
		if i%2 == 1 {
			reg = "odd"
		}
		m.specs[s.ID] = &mirrored{piece: catalog.NewPiece(catalog.Offering{Spec: s, Generation: 1}), facts: ServiceFacts{Registry: reg, Name: s.Name, Tags: s.Tags}}
	}
	r, err := (&Cache{Logger: slog.New(slog.DiscardHandler)}).render(m)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// BenchmarkViewFilter is what a view costs per revision: filtering its
// catalog from the one render, with its gzip form (the first request of
// each view after a refresh pays it; the others are served from memory),
// at 1,000, 10,000 and 20,000 services of ~4.8 kB each, for a view
// holding half of them.
//
//	go test ./pkg/osb -run '^$' -bench BenchmarkViewFilter -benchmem
func BenchmarkViewFilter(b *testing.B) {
	for _, n := range []int{1000, 10000, 20000} {
		r := rendered(b, n, 4700)
		v := &View{Name: "even", Match: func(f ServiceFacts) bool { return f.Registry == "even" }}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				r.views = viewMemo{} // a new revision: filter again
				size = r.forView(v).r.Size()
			}
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}

// TestViewFilterKeepsOrderAndBytes checks the filter on its own: the
// view's body is the full body's services it holds, in the same order,
// byte for byte, with a gzip form and tags of its own, and a second
// request of the view is the same object.
func TestViewFilterKeepsOrderAndBytes(t *testing.T) {
	r := rendered(t, 6, 10)
	v := &View{Name: "even", Tag: "t1", Match: func(f ServiceFacts) bool { return f.Registry == "even" }}
	vc := r.forView(v)
	var got struct{ Services []json.RawMessage }
	if err := json.Unmarshal(vc.r.Body(), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, raw := range got.Services {
		var svc catalog.Service
		if err := json.Unmarshal(raw, &svc); err != nil {
			t.Fatal(err)
		}
		names = append(names, svc.Name)
		if !bytes.Contains(r.Body(), raw) {
			t.Errorf("%s is not byte for byte the full catalog's", svc.Name)
		}
	}
	if strings.Join(names, ",") != "svc-00000,svc-00002,svc-00004" || vc.r.Services != 3 || len(vc.ids) != 3 {
		t.Fatalf("the view lists %v, want the even services in order", names)
	}
	if vc.r.Revision != 7 || vc.r.Gzip == nil || vc.r.ETag == r.ETag || !strings.HasPrefix(vc.r.GzipETag, strings.TrimSuffix(vc.r.ETag, `"`)) {
		t.Errorf("view forms: revision %d gzip %d bytes ETag %s gzip ETag %s (full %s)", vc.r.Revision, len(vc.r.Gzip), vc.r.ETag, vc.r.GzipETag, r.ETag)
	}
	if r.forView(v) != vc {
		t.Error("the view was filtered twice at one revision")
	}
	other := &View{Name: "even", Tag: "t2", Match: v.Match}
	if viewETag(r.ETag, v) == viewETag(r.ETag, other) {
		t.Error("new rules, same ETag")
	}
	none := r.forView(&View{Name: "n", Match: func(ServiceFacts) bool { return false }})
	if string(none.r.Body()) != `{"services":[]}` {
		t.Errorf("an empty view: %s", none.r.Body())
	}
}
