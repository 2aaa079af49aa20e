package osb

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkViewFilter is what a view costs per revision: filtering its
// catalog from the one render (the first request of each view after a
// refresh pays it; the others are served from memory), at 1,000, 10,000
// and 20,000 services of ~4.8 kB each, for a view holding half of them.
//
//	go test ./pkg/osb -run '^$' -bench BenchmarkViewFilter -benchmem
func BenchmarkViewFilter(b *testing.B) {
	svc := `{"name":"%s","id":"%s","description":"` + strings.Repeat("x", 4800) + `","plans":[]}`
	for _, n := range []int{1000, 10000, 20000} {
		r := &Rendered{Revision: 1}
		for i := range n {
			name := fmt.Sprintf("svc-%05d", i)
			reg := "even"
			if i%2 == 1 {
				reg = "odd"
			}
			r.services = append(r.services, servedService{id: name, name: name,
				facts: ServiceFacts{Registry: reg, Name: name, Tags: []string{"t"}}, json: fmt.Appendf(nil, svc, name, name)})
		}
		v := &View{Name: "even", Match: func(f ServiceFacts) bool { return f.Registry == "even" }}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var bytes int
			for b.Loop() {
				r.views = viewMemo{} // a new revision: filter again
				vc := r.forView(v)
				bytes = len(vc.r.Body)
			}
			b.ReportMetric(float64(bytes), "body-bytes")
		})
	}
}

// TestViewFilterKeepsOrderAndBytes checks the filter on its own: the
// view's body is the full body's services it holds, in the same order,
// byte for byte, and a second request of the view is the same object.
func TestViewFilterKeepsOrderAndBytes(t *testing.T) {
	r := &Rendered{Revision: 7}
	for _, s := range []struct{ id, name, reg string }{{"1", "a", "x"}, {"2", "b", "y"}, {"3", "c", "x"}} {
		r.services = append(r.services, servedService{id: s.id, name: s.name, facts: ServiceFacts{Registry: s.reg, Name: s.name},
			json: []byte(`{"name":"` + s.name + `"}`)})
	}
	v := &View{Name: "x", Tag: "t1", Match: func(f ServiceFacts) bool { return f.Registry == "x" }}
	vc := r.forView(v)
	if got := string(vc.r.Body); got != `{"services":[{"name":"a"},{"name":"c"}]}` {
		t.Fatalf("body %s", got)
	}
	if !vc.has("1") || vc.has("2") || !vc.has("3") || vc.r.Revision != 7 {
		t.Fatalf("ids %v revision %d", vc.ids, vc.r.Revision)
	}
	if r.forView(v) != vc {
		t.Error("the view was filtered twice at one revision")
	}
	other := &View{Name: "x", Tag: "t2", Match: v.Match}
	if viewETag(7, vc.r.Body, v) == viewETag(7, vc.r.Body, other) {
		t.Error("new rules, same ETag")
	}
	none := (&Rendered{Revision: 7, services: r.services}).forView(&View{Name: "n", Match: func(ServiceFacts) bool { return false }})
	if string(none.r.Body) != `{"services":[]}` {
		t.Errorf("an empty view: %s", none.r.Body)
	}
}
