package functions_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/osb/osbtest"
)

// The rest of the OSB surface through the local stack: bodies over the
// limit refused as soon as that is known (a real TCP client), updates,
// bindings and last_operation, and the plan change that lets a held-back
// version be adopted.

// raw sends head (request line and headers, without the blank line that
// ends them) and then exactly the body bytes given, on a new connection,
// and reads the response. It never sends more: a server that waited for
// the rest of a body would time the read out.
func (s *stack) raw(head string, body ...[]byte) (int, string) {
	s.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		s.t.Fatal(err)
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		s.t.Fatal(err)
	}
	for _, b := range body {
		if _, err := conn.Write(b); err != nil {
			break // the server may already have answered and closed
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		s.t.Fatalf("%s: no response: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func brokerHeaders() string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(brokerUser+":"+brokerPass)) + "\r\n" +
		"X-Broker-API-Version: 2.17\r\nContent-Type: application/json\r\n"
}

// chunk is one chunk of a chunked body.
func chunk(b []byte) []byte { return fmt.Appendf(nil, "%x\r\n%s\r\n", len(b), b) }

const maxBody = 64 << 10 // the stack's SPECSYNC_MAX_BODY_BYTES (default)

// A body over SPECSYNC_MAX_BODY_BYTES is 413 on every endpoint that takes
// one: by Content-Length before a byte of it is sent, and a chunked one as
// soon as it crosses the limit (its end is never sent), whatever it holds.
func TestE2EBodyLimit(t *testing.T) {
	t.Parallel()
	_, s, db := surfaceStack(t, surfaceIndex)
	small := db.plan("small")
	good := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, db.ID, small)
	if r := s.do(http.MethodPut, "/v2/service_instances/held", "broker", strings.NewReader(good)); r.status != http.StatusCreated {
		t.Fatalf("provision: %d %s", r.status, r.body)
	}

	admin := "Authorization: Bearer " + adminToken + "\r\n"
	for _, c := range []struct{ name, line, headers string }{
		{"provision", "PUT /v2/service_instances/big HTTP/1.1", brokerHeaders()},
		{"update", "PATCH /v2/service_instances/held HTTP/1.1", brokerHeaders()},
		{"bind", "PUT /v2/service_instances/held/service_bindings/big HTTP/1.1", brokerHeaders()},
		{"bootstrap", "POST /bootstrap HTTP/1.1", admin},
		{"provision without credentials", "PUT /v2/service_instances/big HTTP/1.1", ""},
	} {
		status, body := s.raw(c.line + "\r\nHost: stack\r\n" + c.headers + "Content-Length: 4194304\r\n")
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "PayloadTooLarge") {
			t.Errorf("%s with Content-Length 4 MiB and no body sent: %d %s", c.name, status, body)
		}
	}
	garbage := bytes.Repeat([]byte("not json, "), 1024) // 10 KiB a chunk
	for _, c := range []struct{ name, line string }{
		{"provision", "PUT /v2/service_instances/chunky HTTP/1.1"},
		{"update", "PATCH /v2/service_instances/held HTTP/1.1"},
		{"bind", "PUT /v2/service_instances/held/service_bindings/chunky HTTP/1.1"},
	} {
		var chunks [][]byte
		for sent := 0; sent <= maxBody; sent += len(garbage) {
			chunks = append(chunks, chunk(garbage))
		}
		status, body := s.raw(c.line+"\r\nHost: stack\r\n"+brokerHeaders()+"Transfer-Encoding: chunked\r\n", chunks...)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "PayloadTooLarge") {
			t.Errorf("%s with %d KiB of chunked garbage and no end: %d %s", c.name, len(chunks)*10, status, body)
		}
	}
	// A chunked body under the limit is read to its end and used.
	status, body := s.raw("PUT /v2/service_instances/chunked-ok HTTP/1.1\r\nHost: stack\r\n"+brokerHeaders()+"Transfer-Encoding: chunked\r\n",
		chunk([]byte(good[:10])), chunk([]byte(good[10:])), []byte("0\r\n\r\n"))
	if status != http.StatusCreated {
		t.Fatalf("a small chunked provision: %d %s", status, body)
	}
	// Nothing refused was written.
	for _, path := range []string{"/v2/service_instances/big", "/v2/service_instances/chunky", "/v2/service_instances/held/service_bindings/big", "/v2/service_instances/held/service_bindings/chunky"} {
		if r := s.do(http.MethodGet, path, "broker", nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s after its refusal: %d %s", path, r.status, r.body)
		}
	}
}

// surfaceIndex is an index with a bindable, plan-updateable service; its
// plan "sealed" cannot be bound.
const surfaceIndex = `- name: db
  description: the db service
  bindable: true
  plans:
    - name: small
      description: the small plan
      updates_to: [large]
    - name: large
      description: the large plan
      updates_to: [small]
    - name: sealed
      description: the sealed plan
      bindable: false
`

// catalogService is a service as /v2/catalog lists it, with the tests'
// helper.
type catalogService struct{ catalog.Service }

func (c catalogService) plan(name string) string {
	for _, p := range c.Plans {
		if p.Name == name {
			return p.ID
		}
	}
	return ""
}

// surfaceStack is a local stack whose registry team-a serves body (an index with
// a service db), bootstrapped once; it returns the index, the stack and db
// as the catalog lists it.
func surfaceStack(t *testing.T, body string) (*index, *stack, catalogService) {
	t.Helper()
	a, urlA := newIndex(t)
	a.setBody(body)
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))
	s.bootstrap()
	return a, s, s.service("db")
}

// service is the named service as /v2/catalog lists it.
func (s *stack) service(name string) catalogService {
	s.t.Helper()
	r := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	var c catalog.Catalog
	r.json(s.t, &c)
	for _, svc := range c.Services {
		if svc.Name == name {
			return catalogService{svc}
		}
	}
	s.t.Fatalf("no service %s in the catalog: %s", name, r.body)
	return catalogService{}
}

// osb sends a broker request and checks the answer against the OSB
// OpenAPI file; want is the status it must have.
func (s *stack) osb(method, path, template, body string, want int) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := s.do(method, path, "broker", rd)
	if r.status != want {
		s.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	if err := osbtest.Check(method, template, r.status, r.body); err != nil {
		s.t.Fatalf("%s %s: %d %s does not match the OSB OpenAPI: %v", method, path, r.status, r.body, err)
	}
	return r
}

// A platform's whole conversation with the broker, as Cloud Foundry or the
// Kubernetes service catalog has it: catalog, provision, update, bind,
// fetch, poll, unbind, deprovision (with a binding left behind), poll.
func TestE2EInstanceAndBindingLifecycle(t *testing.T) {
	t.Parallel()
	_, s, db := surfaceStack(t, surfaceIndex)
	if !db.InstancesRetrievable || !db.BindingsRetrievable || !db.AllowContextUpdates || !db.PlanUpdateable {
		t.Fatalf("the catalog does not offer the surface: %+v", db)
	}
	small, large, sealed := db.plan("small"), db.plan("large"), db.plan("sealed")
	for _, p := range db.Plans {
		if (p.ID == sealed) != (p.PlanUpdateable != nil && !*p.PlanUpdateable) {
			t.Fatalf("the catalog's plan_updateable of plan %s: %v; only sealed is not updateable", p.Name, p.PlanUpdateable)
		}
	}
	inst := "/v2/service_instances/e2e-1"
	bind := inst + "/service_bindings/app-1"
	q := "?service_id=" + db.ID + "&plan_id="

	s.osb(http.MethodPut, inst+"?accepts_incomplete=true", osbtest.InstancePath,
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"context":{"platform":"cloudfoundry"},"organization_guid":"o","space_guid":"s","maintenance_info":{"version":"1.0.0"}}`, db.ID, small), http.StatusCreated)
	s.osb(http.MethodGet, inst+"/last_operation"+q+small, osbtest.InstanceLastOp, "", http.StatusOK)
	s.osb(http.MethodPatch, inst+"?accepts_incomplete=true", osbtest.InstancePath,
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"previous_values":{"plan_id":%q}}`, db.ID, large, small), http.StatusOK)
	r := s.osb(http.MethodGet, inst, osbtest.InstancePath, "", http.StatusOK)
	if !strings.Contains(string(r.body), `"plan_id":"`+large+`"`) {
		t.Fatalf("after the plan change: %s", r.body)
	}
	// The platform polls the update with the plan from before it.
	lo := s.osb(http.MethodGet, inst+"/last_operation"+q+small, osbtest.InstanceLastOp, "", http.StatusOK)
	if !strings.Contains(string(lo.body), `"state":"succeeded"`) {
		t.Fatalf("last_operation after the update: %s", lo.body)
	}
	// large updates_to [small] only: the catalog cannot say so (large
	// is plan_updateable there), so the platform asked in good faith and
	// OSB's 422 for an unsupported change answers.
	s.osb(http.MethodPatch, inst, osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, db.ID, sealed), http.StatusUnprocessableEntity)
	s.osb(http.MethodPatch, inst, osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"maintenance_info":{"version":"9.0.0"}}`, db.ID), http.StatusUnprocessableEntity)
	// An update of an instance that does not exist: no instance_usable,
	// there is no instance for it to describe.
	if r := s.osb(http.MethodPatch, "/v2/service_instances/never", osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q}`, db.ID), http.StatusBadRequest); strings.Contains(string(r.body), "instance_usable") || !strings.Contains(string(r.body), "InstanceNotFound") {
		t.Fatalf("PATCH of an unknown instance: %s", r.body)
	}

	r = s.osb(http.MethodPut, bind+"?accepts_incomplete=true", osbtest.BindingPath,
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app-1"}}`, db.ID, large), http.StatusCreated)
	if string(bytes.TrimSpace(r.body)) != "{}" {
		t.Fatalf("a binding answered %s: this broker has no credentials to give", r.body)
	}
	s.osb(http.MethodPut, bind, osbtest.BindingPath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app-1"}}`, db.ID, large), http.StatusOK)
	s.osb(http.MethodGet, bind, osbtest.BindingPath, "", http.StatusOK)
	s.osb(http.MethodGet, bind+"/last_operation", osbtest.BindingLastOpPath, "", http.StatusOK)
	s.osb(http.MethodDelete, bind+q+large, osbtest.BindingPath, "", http.StatusOK)
	s.osb(http.MethodDelete, bind+q+large, osbtest.BindingPath, "", http.StatusGone)
	s.osb(http.MethodGet, bind+"/last_operation", osbtest.BindingLastOpPath, "", http.StatusGone)

	// A sealed instance cannot be bound; an unknown one neither.
	s.osb(http.MethodPut, "/v2/service_instances/e2e-2", osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, db.ID, sealed), http.StatusCreated)
	// sealed is not plan_updateable, and the catalog says so: a platform
	// that asks anyway (reading the service-level plan_updateable) asked
	// for a change that is not supported, OSB's 422.
	s.osb(http.MethodPatch, "/v2/service_instances/e2e-2", osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, db.ID, small), http.StatusUnprocessableEntity)
	s.osb(http.MethodPut, "/v2/service_instances/e2e-2/service_bindings/x", osbtest.BindingPath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, db.ID, sealed), http.StatusBadRequest)
	s.osb(http.MethodPut, "/v2/service_instances/nope/service_bindings/x", osbtest.BindingPath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, db.ID, small), http.StatusBadRequest)

	// A deprovision with a binding left takes it along.
	s.osb(http.MethodPut, bind, osbtest.BindingPath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, db.ID, large), http.StatusCreated)
	s.osb(http.MethodDelete, inst+"?accepts_incomplete=true&service_id="+db.ID+"&plan_id="+large, osbtest.InstancePath, "", http.StatusOK)
	s.osb(http.MethodGet, inst+"/last_operation", osbtest.InstanceLastOp, "", http.StatusGone)
	s.osb(http.MethodGet, bind+"/last_operation", osbtest.BindingLastOpPath, "", http.StatusGone)
	s.osb(http.MethodGet, bind, osbtest.BindingPath, "", http.StatusNotFound)
	s.osb(http.MethodGet, "/v2/service_instances/never/last_operation", osbtest.InstanceLastOp, "", http.StatusNotFound)
}

// heldIndex is a db whose plan large may move to small; version two drops
// large.
func heldIndex(v2 bool) string {
	if v2 {
		return "- name: db\n  description: the db service\n  plans:\n    - name: small\n      description: the small plan\n"
	}
	return `- name: db
  description: the db service
  plans:
    - name: small
      description: the small plan
    - name: large
      description: the large plan
      updates_to: [small]
`
}

// No half-upgrades, and how one ends: a version that drops the plan an
// instance is on is held back; the platform moves the instance to another
// plan (PATCH); the next bootstrap adopts the version, the feed carries the
// update, and the instance can take its maintenance_info.
func TestE2EPlanChangeReleasesHeldBackVersion(t *testing.T) {
	t.Parallel()
	a, s, db := surfaceStack(t, heldIndex(false))
	small, large := db.plan("small"), db.plan("large")
	s.osb(http.MethodPut, "/v2/service_instances/big-1", osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`, db.ID, large), http.StatusCreated)

	a.setBody(heldIndex(true))
	if r := s.bootstrap().result(t, "team-a"); r.Counts.Updated != 0 {
		t.Fatalf("a version stranding big-1 was adopted: %+v", r)
	}
	cat := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	rev := cat.header.Get(api.RevisionHeader)
	if got := planMaintenance(t, cat.body, "db"); !slices.Equal(got, []string{"small@1.0.0", "large@1.0.0"}) {
		t.Fatalf("held back, the catalog is %v", got)
	}
	// A bootstrap while the instance is still on large keeps holding.
	if r := s.bootstrap().result(t, "team-a"); r.Counts.Updated != 0 {
		t.Fatalf("adopted while still blocked: %+v", r)
	}

	s.osb(http.MethodPatch, "/v2/service_instances/big-1", osbtest.InstancePath,
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"previous_values":{"plan_id":%q}}`, db.ID, small, large), http.StatusOK)
	if r := s.bootstrap().result(t, "team-a"); r.Counts.Updated != 1 {
		t.Fatalf("the released version was not adopted: %+v", r)
	}
	cat = s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if got := planMaintenance(t, cat.body, "db"); !slices.Equal(got, []string{"small@2.0.0"}) {
		t.Fatalf("after adoption the catalog is %v", got)
	}
	feed := s.do(http.MethodGet, "/v2/catalog/changes?since="+rev, "broker", nil)
	var page api.ChangePage
	feed.json(t, &page)
	if len(page.Changes) != 1 || page.Changes[0].Kind != api.ChangeUpdated || page.Changes[0].ServiceID != db.ID {
		t.Fatalf("the feed after the hold: %s", feed.body)
	}
	if svc := page.Changes[0].Service; svc == nil || len(svc.Plans) != 1 || svc.Plans[0].MaintenanceInfo == nil || svc.Plans[0].MaintenanceInfo.Version != "2.0.0" {
		t.Fatalf("the feed's service: %s", feed.body)
	}
	// The instance is still on 1.0.0 until the platform upgrades it.
	if r := s.osb(http.MethodGet, "/v2/service_instances/big-1", osbtest.InstancePath, "", http.StatusOK); !strings.Contains(string(r.body), `"version":"1.0.0"`) {
		t.Fatalf("before its upgrade the instance says %s", r.body)
	}
	s.osb(http.MethodPatch, "/v2/service_instances/big-1", osbtest.InstancePath, fmt.Sprintf(`{"service_id":%q,"maintenance_info":{"version":"2.0.0"}}`, db.ID), http.StatusOK)
	if r := s.osb(http.MethodGet, "/v2/service_instances/big-1", osbtest.InstancePath, "", http.StatusOK); !strings.Contains(string(r.body), `"version":"2.0.0"`) {
		t.Fatalf("after its upgrade the instance says %s", r.body)
	}
}
