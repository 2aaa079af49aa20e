package osb_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/store"
)

// A platform under load provisions many instances of one service at once.
// A provision's transaction writes only its own instance document (the
// spec keeps no counters: usage.go in pkg/store), so a burst of them never
// queues on one document: every request answers what OSB says, and never
// 422 ConcurrencyError. The bursts are sent all at once over real HTTP to
// one broker on the emulator; each answer is checked against the OSB
// OpenAPI file.
const burstSize = 100

// burstBody is a provision body without parameters (a digest of
// parameters costs 27 ms of a core each, which would measure Argon2id,
// not contention); namespace sets its context.
func burstBody(serviceID, planID, namespace string) string {
	return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,%s,"context":{"platform":"kubernetes","namespace":%q}}`, serviceID, planID, guids, namespace)
}

// burst sends n requests at once (each built before the start) and
// returns their answers in order.
func (e *env) burst(n int, req func(i int) *http.Request) []response {
	e.t.Helper()
	reqs := make([]*http.Request, n)
	for i := range n {
		reqs[i] = req(i)
	}
	start := make(chan struct{})
	out := make([]response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = e.try(reqs[i])
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

// statuses counts answers by status, checking each against the OSB file
// (template is the OpenAPI path) and that it is never a 422.
func statuses(t *testing.T, method, template string, rs []response) map[int]int {
	t.Helper()
	got := map[int]int{}
	for _, r := range rs {
		wantOSBResponse(t, method, template, r)
		if r.status == http.StatusUnprocessableEntity {
			t.Errorf("a request of the burst answered 422: %s", r.body)
		}
		got[r.status]++
	}
	return got
}

func TestBurstProvisionsOfOnePlanAllCreated(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	began := time.Now()
	rs := e.burst(burstSize, func(i int) *http.Request {
		return e.request(http.MethodPut, fmt.Sprintf("/v2/service_instances/burst-%03d", i), burstBody(db.ID, small, "apps"))
	})
	took := time.Since(began)
	if got := statuses(t, http.MethodPut, instancePath, rs); got[http.StatusCreated] != burstSize {
		t.Fatalf("%d provisions of one plan at once answered %v, want %d x 201", burstSize, got, burstSize)
	}
	for _, r := range rs {
		wantEmptyObject(t, r, http.StatusCreated)
	}
	rec := e.specRecord(db.ID)
	if rec.Instances != burstSize || rec.PlanInstances[small] != burstSize {
		t.Fatalf("usage after the burst: %d instances, per plan %v; want %d on %s", rec.Instances, rec.PlanInstances, burstSize, small)
	}
	if n := len(e.instanceDocs()); n != burstSize {
		t.Fatalf("%d instance records, want %d", n, burstSize)
	}
	t.Logf("%d provisions of one plan at once: all 201 in %v", burstSize, took)
}

// OSB: a provision of an id that exists with identical attributes is 200.
// All at once, exactly one request creates the instance; the others see
// it (after their transaction retries, if it committed under them) and
// answer 200, never 409 nor 422.
func TestBurstIdenticalProvisionsOfOneID(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	rs := e.burst(burstSize, func(int) *http.Request {
		return e.request(http.MethodPut, "/v2/service_instances/same", burstBody(db.ID, small, "apps"))
	})
	got := statuses(t, http.MethodPut, instancePath, rs)
	if got[http.StatusCreated] != 1 || got[http.StatusOK] != burstSize-1 {
		t.Fatalf("%d identical provisions of one id answered %v, want 1 x 201 and %d x 200", burstSize, got, burstSize-1)
	}
	if rec := e.specRecord(db.ID); rec.Instances != 1 {
		t.Fatalf("%d instances after identical provisions, want 1", rec.Instances)
	}
}

// Differing provisions of one id (each its own namespace): exactly one
// creates the instance, every other is 409, and the record is the
// winner's.
func TestBurstDifferingProvisionsOfOneID(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	rs := e.burst(burstSize, func(i int) *http.Request {
		return e.request(http.MethodPut, "/v2/service_instances/contested", burstBody(db.ID, small, fmt.Sprintf("ns-%03d", i)))
	})
	got := statuses(t, http.MethodPut, instancePath, rs)
	if got[http.StatusCreated] != 1 || got[http.StatusConflict] != burstSize-1 {
		t.Fatalf("%d differing provisions of one id answered %v, want 1 x 201 and %d x 409", burstSize, got, burstSize-1)
	}
	winner := -1
	for i, r := range rs {
		if r.status == http.StatusCreated {
			winner = i
		}
	}
	if ns := e.instanceDocs()["contested"].Context["namespace"]; ns != fmt.Sprintf("ns-%03d", winner) {
		t.Fatalf("the record's namespace is %v, but request %d was created", ns, winner)
	}
}

// Binds of one instance write only their own binding documents: all at
// once, every one is created.
func TestBurstBindsOfOneInstanceAllCreated(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("bound", db.ID, small)
	const n = burstSize
	rs := e.burst(n, func(i int) *http.Request {
		return e.request(http.MethodPut, bindingURL("bound", fmt.Sprintf("b-%03d", i)), bindBody(db.ID, small, fmt.Sprintf(`"bind_resource":{"app_guid":"app-%03d"}`, i)))
	})
	if got := statuses(t, http.MethodPut, bindingPath, rs); got[http.StatusCreated] != n {
		t.Fatalf("%d binds of one instance at once answered %v, want %d x 201", n, got, n)
	}
	if got := len(e.bindingDocs("bound")); got != n {
		t.Fatalf("%d binding records, want %d", got, n)
	}
	// The deprovision takes them all along, in its one transaction.
	wantEmptyObject(t, e.do(http.MethodDelete, "/v2/service_instances/bound?service_id="+db.ID+"&plan_id="+small, ""), http.StatusOK)
	if got := len(e.bindingDocs("bound")); got != 0 {
		t.Fatalf("%d bindings outlived their instance", got)
	}
}

// A burst of provisions of one spec races the reconcile's mark and delete
// of it: provisions do not conflict with one another, only with the delete
// (its query locks the spec's range of instances). Whatever the
// interleaving, the delete happens only if no provision was created, every
// 201 is an instance that exists, a refusal is the marked spec's 400, and
// the invariant checker (at the end of the test) finds every instance's
// spec stored.
func TestBurstProvisionsVersusDelete(t *testing.T) {
	const n = 50
	// The mark starts with the burst, a few milliseconds into it (so that
	// some provisions usually land first), or before it.
	for round, r := range []struct {
		premarked bool
		markAfter time.Duration
	}{{false, 0}, {false, 5 * time.Millisecond}, {true, 0}} {
		premarked := r.premarked
		e := newEnv(t, time.Minute)
		victim := parseSpec(t, specYAML("victim"))
		e.seed(victim)
		if premarked {
			e.mark(victim.ID, "run-1")
		}
		var outcome store.DeleteOutcome
		var markErr, delErr error
		var rs []response
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(r.markAfter)
			if !premarked {
				_, markErr = e.st.MarkSpec(e.ctx, testReg, victim.ID, "run-1")
			}
			if markErr == nil {
				outcome, _, delErr = e.st.DeleteMarked(e.ctx, testReg, victim.ID, "run-2", time.Now().Add(time.Hour))
			}
		})
		rs = e.burst(n, func(i int) *http.Request {
			return e.request(http.MethodPut, fmt.Sprintf("/v2/service_instances/race-%03d", i), burstBody(victim.ID, victim.Plans[i%2].ID, "apps"))
		})
		wg.Wait()
		if markErr != nil || delErr != nil {
			t.Fatalf("round %d: mark %v, delete %v", round, markErr, delErr)
		}
		got := statuses(t, http.MethodPut, instancePath, rs)
		if got[http.StatusCreated]+got[http.StatusBadRequest] != n {
			t.Fatalf("round %d: answers %v, want only 201 and 400", round, got)
		}
		docs := e.instanceDocs()
		if len(docs) != got[http.StatusCreated] {
			t.Fatalf("round %d: %d created, %d instance records", round, got[http.StatusCreated], len(docs))
		}
		switch outcome {
		case store.Deleted:
			if len(docs) != 0 {
				t.Fatalf("round %d: the spec was deleted under %d instances", round, len(docs))
			}
		case store.Referenced:
			if len(docs) == 0 {
				t.Fatalf("round %d: the delete kept a spec no instance references", round)
			}
		default:
			t.Fatalf("round %d: delete %s", round, outcome)
		}
		if premarked && outcome != store.Deleted {
			t.Fatalf("round %d: spec marked before the burst: %d created, delete %s", round, len(docs), outcome)
		}
		e.commit()
		t.Logf("round %d: %d of %d provisions created, delete %s", round, len(docs), n, outcome)
	}
}
