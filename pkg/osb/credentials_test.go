package osb_test

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/osb"
	"github.com/specsync/specsync/pkg/store"
	"github.com/specsync/specsync/pkg/web"
)

// The broker checks the password through Config.VerifyPassword when it is
// set: a broker that holds only the digest serves the platform that
// presents the password.
func TestBrokerWithPasswordDigest(t *testing.T) {
	t.Parallel()
	st := store.New(emulatortest.Firestore(t))
	b := osb.NewBroker(st, osb.Config{Username: brokerUser, VerifyPassword: web.MatchSHA256(digest(brokerPass))})
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		user, pass string
		want       int
	}{
		{brokerUser, brokerPass, http.StatusOK},
		{brokerUser, brokerPass + "x", http.StatusUnauthorized},
		{"someone", brokerPass, http.StatusUnauthorized},
		{brokerUser, "", http.StatusUnauthorized},
		{brokerUser, string(digest(brokerPass)), http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v2/catalog", nil)
		req.SetBasicAuth(c.user, c.pass)
		req.Header.Set("X-Broker-API-Version", apiVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s / %q: %d, want %d", c.user, c.pass, resp.StatusCode, c.want)
		}
	}
}

// An empty plain password accepts nothing, not the empty password.
func TestBasicAuthEmptyPasswordAcceptsNothing(t *testing.T) {
	t.Parallel()
	h := osb.BasicAuth(brokerUser, "", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	req := httptest.NewRequest(http.MethodGet, "/v2/catalog", nil)
	req.SetBasicAuth(brokerUser, "")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("an unset password lets the empty password in: %d", w.Code)
	}
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func digest(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
