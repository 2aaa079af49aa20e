// Package googletest stands in, in process, for the Google services that
// auth type google talks to and that a test cannot reach: Google's OAuth2
// token endpoint (the JWT-bearer grant a service account key file uses)
// and Artifact Registry's Docker API (its token realm and its tags/list
// with child repositories), each speaking the documented protocol. The
// code under test reaches them by their real names (europe-docker.pkg.dev,
// storage.googleapis.com) over HTTPS through Transport, as a hosts file
// entry and a trusted certificate would make it.
package googletest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
)

// Transport is a transport that connects to srv (a TLS server) whatever
// host a request names, and trusts srv's certificate for every name: the
// test's hosts file. Plain-HTTP requests reach srv too, which refuses
// them as an HTTPS server does.
func Transport(srv *httptest.Server) *http.Transport {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		// httptest's certificate names example.com; checking it against
		// that name keeps verification on without a certificate per host.
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "example.com"},
		ForceAttemptHTTP2: true,
	}
}
