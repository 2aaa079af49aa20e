package osb_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// TestRacesPatchAndBindVersusMarkAndDelete races, through the broker's
// HTTP surface, the three things a platform does to an existing instance
// against a reconcile that marks and deletes its spec, many times at once
// (bounded: the emulator times transactions out under heavy contention):
//
//   - a plan change (PATCH) against mark-then-delete: the change lands
//     while the spec is active (200, the pin moved) or is refused because
//     it is marked (400, nothing moved); the delete keeps the spec, which
//     the instance pins either way;
//   - a bind against mark-then-delete, the instance staying: the bind
//     always succeeds (a marked spec's instances still take bindings) and
//     the spec is kept, pinned by the instance alone;
//   - a bind against deprovision-then-mark-then-delete: the bind lands
//     before the deprovision (which takes it along) or finds no instance
//     (400); the spec is deleted every time, because a binding pins
//     nothing.
//
// Whatever the interleaving, the invariant checker must find every
// instance's spec stored and no binding without its instance, and the
// spec's usage (counted from the records) must follow the instance.
func TestRacesPatchAndBindVersusMarkAndDelete(t *testing.T) {
	const perKind = 6
	e := newEnv(t, time.Minute)
	kinds := []string{"patch", "bind", "unbound"}
	specs := map[string]*spec.Spec{}
	var all []*spec.Spec
	for _, k := range kinds {
		for i := range perKind {
			s := parseSpec(t, specYAML(fmt.Sprintf("%s-%d", k, i)))
			specs[s.Name] = s
			all = append(all, s)
		}
	}
	e.seed(all...)
	for _, s := range all {
		e.provision("inst-"+s.Name, s.ID, s.Plans[0].ID)
	}

	// retry repeats what contention refused (422 ConcurrencyError from the
	// broker, a retryable store error): a caller retries those.
	retryHTTP := func(req func() *http.Request) (response, error) {
		var r response
		var err error
		for range 5 {
			if r, err = e.try(req()); err != nil || r.status != http.StatusUnprocessableEntity {
				return r, err
			}
		}
		return r, err
	}
	retryStore := func(f func() error) error {
		var err error
		for range 5 {
			if err = f(); err == nil || !failure.Retryable(err) {
				return err
			}
		}
		return err
	}
	markAndDelete := func(s *spec.Spec) (store.DeleteOutcome, error) {
		if err := retryStore(func() error { _, err := e.st.MarkSpec(e.ctx, testReg, s.ID, "run-1"); return err }); err != nil {
			return "", fmt.Errorf("mark: %w", err)
		}
		var out store.DeleteOutcome
		err := retryStore(func() error {
			var err error
			out, _, err = e.st.DeleteMarked(e.ctx, testReg, s.ID, "run-2", time.Now().Add(time.Hour))
			return err
		})
		return out, err
	}

	var patched, patchRefused, bound, boundFirst, unboundFirst atomic.Int64
	errs := make(chan error, 3*len(all))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, s := range all {
		kind := strings.SplitN(s.Name, "-", 2)[0]
		inst := "inst-" + s.Name
		small, large := s.Plans[0].ID, s.Plans[1].ID
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var inner sync.WaitGroup
			var r response
			var reqErr error
			var outcome store.DeleteOutcome
			var delErr error
			inner.Go(func() {
				switch kind {
				case "patch":
					r, reqErr = retryHTTP(func() *http.Request {
						return e.request(http.MethodPatch, "/v2/service_instances/"+inst, patchBody(s.ID, large, ""))
					})
				default:
					r, reqErr = retryHTTP(func() *http.Request {
						return e.request(http.MethodPut, bindingURL(inst, "b"), bindBody(s.ID, small, ""))
					})
				}
			})
			inner.Go(func() {
				if kind == "unbound" {
					dr, err := retryHTTP(func() *http.Request {
						return e.request(http.MethodDelete, "/v2/service_instances/"+inst+"?service_id="+s.ID+"&plan_id="+small, "")
					})
					if err != nil || dr.status != http.StatusOK {
						delErr = fmt.Errorf("deprovision: %d %s %v", dr.status, dr.body, err)
						return
					}
				}
				outcome, delErr = markAndDelete(s)
			})
			inner.Wait()
			if reqErr != nil || delErr != nil {
				errs <- fmt.Errorf("%s: request %v, delete %v", s.Name, reqErr, delErr)
				return
			}
			switch {
			case kind == "patch" && r.status == http.StatusOK:
				patched.Add(1)
			case kind == "patch" && r.status == http.StatusBadRequest && strings.Contains(string(r.body), "marked for deletion"):
				patchRefused.Add(1)
			case kind == "bind" && r.status == http.StatusCreated:
				bound.Add(1)
			case kind == "unbound" && r.status == http.StatusCreated:
				boundFirst.Add(1)
			case kind == "unbound" && r.status == http.StatusBadRequest && strings.Contains(string(r.body), "InstanceNotFound"):
				unboundFirst.Add(1)
			default:
				errs <- fmt.Errorf("%s: %s answered %d %s", s.Name, kind, r.status, r.body)
			}
			want := store.Referenced
			if kind == "unbound" {
				want = store.Deleted
			}
			if outcome != want {
				errs <- fmt.Errorf("%s: delete %s, want %s", s.Name, outcome, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("patch vs mark: %d applied, %d refused as marked; bind vs mark: %d bound; bind vs deprovision: %d bound first, %d found no instance",
		patched.Load(), patchRefused.Load(), bound.Load(), boundFirst.Load(), unboundFirst.Load())

	// Each outcome left exactly the records it says.
	docs := e.instanceDocs()
	for _, s := range all {
		kind, inst := strings.SplitN(s.Name, "-", 2)[0], "inst-"+s.Name
		rec, ok := docs[inst]
		switch kind {
		case "patch":
			counts := e.specRecord(s.ID).PlanInstances
			if (rec.PlanID == s.Plans[1].ID) != (counts[s.Plans[1].ID] == 1) || counts[s.Plans[0].ID]+counts[s.Plans[1].ID] != 1 {
				t.Errorf("%s: instance on %s, pins %v", s.Name, rec.PlanID, counts)
			}
		case "bind":
			if !ok || len(e.bindingDocs(inst)) != 1 {
				t.Errorf("%s: instance present %v, %d bindings recorded", s.Name, ok, len(e.bindingDocs(inst)))
			}
		case "unbound":
			if ok || len(e.bindingDocs(inst)) != 0 {
				t.Errorf("%s: instance present %v, bindings %v after the deprovision", s.Name, ok, e.bindingDocs(inst))
			}
			if _, err := e.st.GetSpec(e.ctx, s.ID); !failure.Is(err, failure.NotFound) {
				t.Errorf("%s: spec not deleted: %v", s.Name, err)
			}
		}
	}
	if patched.Load()+patchRefused.Load() != perKind || bound.Load() != perKind || boundFirst.Load()+unboundFirst.Load() != perKind {
		t.Errorf("outcomes do not add up: %d+%d, %d, %d+%d of %d each", patched.Load(), patchRefused.Load(), bound.Load(), boundFirst.Load(), unboundFirst.Load(), perKind)
	}
	e.commit()
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{brokerPass, adminToken, "correct horse battery"}})
}
