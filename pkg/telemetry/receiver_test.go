package telemetry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// receiver is an OTLP trace receiver (the collector's TraceService over
// gRPC) run in the test's process: what telemetry.googleapis.com and a
// collector speak.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// hold, when set, keeps every export waiting until it is closed: a
	// backend that takes the call and never answers.
	hold chan struct{}

	calls atomic.Int32
	mu    sync.Mutex
	got   []*collectortrace.ExportTraceServiceRequest
	auth  []string // the authorization metadata of each export answered
}

func (r *receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.calls.Add(1)
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, req)
	r.auth = append(r.auth, md.Get("authorization")...)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// answered is what the receiver took and answered so far.
func (r *receiver) answered() ([]*collectortrace.ExportTraceServiceRequest, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*collectortrace.ExportTraceServiceRequest(nil), r.got...), append([]string(nil), r.auth...)
}

// serve runs r on a loopback port, over TLS when creds is set, until the
// test ends; it returns the port's address.
func (r *receiver) serve(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opts []grpc.ServerOption
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	s := grpc.NewServer(opts...)
	collectortrace.RegisterTraceServiceServer(s, r)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(func() {
		if r.hold != nil {
			close(r.hold)
		}
		s.Stop()
	})
	return lis.Addr().String()
}

// selfSigned is a TLS certificate for 127.0.0.1 and a client config
// that trusts it (and nothing else).
func selfSigned(t *testing.T) (credentials.TransportCredentials, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "telemetry receiver"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server := credentials.NewServerTLSFromCert(&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	return server, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// applicationDefaultCredentials points GOOGLE_APPLICATION_CREDENTIALS at
// a user credential (gcloud's kind) whose token endpoint is an OAuth 2.0
// server in the test's process: it trades the refresh token for
// accessToken, as Google's does (RFC 6749 §6).
func applicationDefaultCredentials(t *testing.T, accessToken string) {
	t.Helper()
	const refresh = "refresh-token-of-the-test"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != refresh {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": accessToken, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(srv.Close)
	file, err := json.Marshal(map[string]string{
		"type": "authorized_user", "client_id": "test-client", "client_secret": "test-secret",
		"refresh_token": refresh, "token_uri": srv.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
}

// resourceAttrs and spanNames read what one export carried.
func resourceAttrs(req *collectortrace.ExportTraceServiceRequest) map[string]string {
	out := map[string]string{}
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			out[kv.GetKey()] = stringValue(kv.GetValue())
		}
	}
	return out
}

func stringValue(v *commonpb.AnyValue) string { return v.GetStringValue() }

func spanNames(reqs []*collectortrace.ExportTraceServiceRequest) []string {
	var out []string
	for _, req := range reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, s.GetName())
				}
			}
		}
	}
	return out
}
