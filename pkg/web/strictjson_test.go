package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/web"
)

// strictBody has the shapes of the broker's bodies: plain fields, a
// nested struct behind a pointer, a raw object, a list of structs.
type strictBody struct {
	ServiceID    string          `json:"service_id"`
	Context      json.RawMessage `json:"context,omitempty"`
	BindResource *struct {
		AppGUID string `json:"app_guid"`
	} `json:"bind_resource,omitempty"`
	Items   []struct{ Name string } `json:"items"`
	Ignored string                  `json:"-"`
}

// DecodeBody reads keys as written: a key that names a field in another
// case, or one given twice in an object, is a 400 saying which key and
// where; keys of free objects (a context) keep their case, and unknown
// keys are ignored as OSB has them.
func TestDecodeBodyKeysAreStrict(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string // in the refusal's description; nil: accepted
	}{
		{`{"service_id":"a","context":{"A":1,"a":2},"bind_resource":{"app_guid":"x"},"items":[{"Name":"n"}],"unknown":1,"Service_IDx":2}`, nil},
		{`{"SERVICE_ID":"a"}`, []string{`"SERVICE_ID"`, `"service_id"`, "the request body", "case-sensitive"}},
		{`{"service_id":"a","Service_Id":"b"}`, []string{`"Service_Id"`, `"service_id"`}},
		{`{"ſervice_id":"a"}`, []string{`"service_id"`, "case-sensitive"}}, // a long s: encoding/json folds it to s
		{`{"bind_resource":{"app_guid":"a","Key":1}}`, nil},                // a Kelvin sign names no field here
		{`{"items":[{"Kame":"n"}]}`, nil},                                  // nor here
		{`{"service_id":"a","items":[{"NAMe":"n","Name":"m"}]}`, []string{`"NAMe"`, `"Name"`}},
		{`{"service_id":"a","service_id":"b"}`, []string{`"service_id"`, "twice", "the request body"}},
		{`{"service_id":"a","service\u005fid":"b"}`, []string{`"service_id"`, "twice"}},
		{`{"bind_resource":{"APP_GUID":"x"}}`, []string{`"APP_GUID"`, "bind_resource", `"app_guid"`}},
		{`{"bind_resource":{"app_guid":"x","app_guid":"y"}}`, []string{`"app_guid"`, "twice", "in bind_resource"}},
		{`{"context":{"ns":"a","ns":"b"}}`, []string{`"ns"`, "twice", "in context"}},
		{`{"context":{"deep":[{},{"k":1,"k":2}]}}`, []string{`"k"`, "twice", "in context.deep[1]"}},
		{`{"items":[{"Name":"a"},{"NAME":"b"}]}`, []string{`"NAME"`, "items[1]", `"Name"`}},
		{`{"Ignored":"x"}`, nil}, // json:"-": no field of that name to fill
		{`{"context":{"n":1e400},"service_id":"a","service_id":"b"}`, []string{`"service_id"`, "twice"}},
	} {
		var v strictBody
		w := httptest.NewRecorder()
		ok := web.DecodeBody(w, httptest.NewRequest(http.MethodPut, "/x", strings.NewReader(c.body)), 1<<16, &v)
		if c.want == nil {
			if !ok {
				t.Errorf("%s refused: %s", c.body, w.Body.String())
			}
			continue
		}
		if ok || w.Code != http.StatusBadRequest {
			t.Errorf("%s: accepted (%d), want a 400", c.body, w.Code)
			continue
		}
		var eb api.ErrorBody
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error != "BadRequest" {
			t.Errorf("%s: %q is not a BadRequest body", c.body, w.Body.String())
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(eb.Description, s) {
				t.Errorf("%s: %q does not say %s", c.body, eb.Description, s)
			}
		}
	}
}

// A key of any length is quoted in part, and so is a long path.
func TestDecodeBodyQuotesLongKeysInPart(t *testing.T) {
	long := strings.Repeat("k", 5000)
	body := `{"context":{"` + long + `":{"` + long + `":1,"` + long + `":2}}}`
	var v strictBody
	w := httptest.NewRecorder()
	if web.DecodeBody(w, httptest.NewRequest(http.MethodPut, "/x", strings.NewReader(body)), 1<<16, &v) {
		t.Fatal("a duplicated long key was accepted")
	}
	if w.Body.Len() > 600 {
		t.Fatalf("the refusal is %d bytes: %.200s", w.Body.Len(), w.Body.String())
	}
	// 5,000 levels deep (a path per level would be 12 MB), the key
	// given twice at the bottom.
	deep := strings.Repeat(`{"k":`, 5000) + `{"a":1,"a":2}` + strings.Repeat(`}`, 5000)
	w = httptest.NewRecorder()
	if web.DecodeBody(w, httptest.NewRequest(http.MethodPut, "/x", strings.NewReader(`{"context":`+deep+`}`)), 1<<16, &v) {
		t.Fatal("a key given twice 5,000 levels deep was accepted")
	}
	if !strings.Contains(w.Body.String(), `in \"context.k.k.k`) || w.Body.Len() > 600 {
		t.Fatalf("the refusal: %.300s", w.Body.String())
	}
}
