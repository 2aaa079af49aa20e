package osb_test

import (
	"fmt"
	"net/http"
	"testing"
)

// OSB: a bind under a binding id that exists is 200 when it is the same
// binding and 409 when it is another. All at once over real HTTP, exactly
// one request creates the binding; the others read it and answer from
// it, never 422 (statuses checks each answer against the OSB file too).
func TestBurstIdenticalBindsOfOneID(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("bound", db.ID, small)
	rs := e.burst(burstSize, func(int) *http.Request {
		return e.request(http.MethodPut, bindingURL("bound", "same"), bindBody(db.ID, small, `"bind_resource":{"app_guid":"app-1"}`))
	})
	got := statuses(t, http.MethodPut, bindingPath, rs)
	if got[http.StatusCreated] != 1 || got[http.StatusOK] != burstSize-1 {
		t.Fatalf("%d identical binds of one id answered %v, want 1 x 201 and %d x 200", burstSize, got, burstSize-1)
	}
	for _, r := range rs {
		wantEmptyObject(t, r, r.status)
	}
	if n := len(e.bindingDocs("bound")); n != 1 {
		t.Fatalf("%d binding records after identical binds, want 1", n)
	}
}

// Differing binds of one id (each its own application): exactly one
// creates the binding, every other is 409, and the record is the
// winner's.
func TestBurstDifferingBindsOfOneID(t *testing.T) {
	e, db := newDBEnv(t)
	small := db.Plans[0].ID
	e.provision("bound", db.ID, small)
	const n = 50
	rs := e.burst(n, func(i int) *http.Request {
		return e.request(http.MethodPut, bindingURL("bound", "contested"), bindBody(db.ID, small, fmt.Sprintf(`"bind_resource":{"app_guid":"app-%03d"}`, i)))
	})
	got := statuses(t, http.MethodPut, bindingPath, rs)
	if got[http.StatusCreated] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("%d differing binds of one id answered %v, want 1 x 201 and %d x 409", n, got, n-1)
	}
	winner := -1
	for i, r := range rs {
		if r.status == http.StatusCreated {
			winner = i
		}
	}
	if app := e.bindingDocs("bound")["contested"].AppGUID; app != fmt.Sprintf("app-%03d", winner) {
		t.Fatalf("the record's app_guid is %q, but request %d was created", app, winner)
	}
}
