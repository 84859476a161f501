package testenv

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// WebTLS is a web configuration file of prometheus/exporter-toolkit that
// a test made in a temporary directory: TLS with a server certificate for
// 127.0.0.1, ::1 and localhost signed by a CA of its own (PKI), and basic
// auth of one user (its password stored as a bcrypt hash, as the file
// needs).
type WebTLS struct {
	ConfigFile     string // web-config.yml: the exporter's --web.config.file
	CAFile         string // ca.crt: the CA that signed the server's certificate (PEM)
	User, Password string
	CA             *x509.CertPool // the CA's certificate
}

// WebUser is the user NewWebTLS lets in.
const WebUser = "prometheus"

// NewWebTLS makes the CA, the server's certificate and key, and
// web-config.yml.
func NewWebTLS(t testing.TB) WebTLS {
	t.Helper()
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Issue("server", "localhost", nil, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	w := WebTLS{
		ConfigFile: filepath.Join(p.Dir, "web-config.yml"), CAFile: p.Path("ca", "crt"),
		User: WebUser, Password: rand.Text(), CA: p.Pool(),
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(w.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// Relative paths: the toolkit reads them from the file's directory.
	config := fmt.Sprintf("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  %s: %s\n", w.User, hash)
	if err := os.WriteFile(w.ConfigFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// Client is an HTTPS client that trusts the CA and, with auth, sends the
// user's basic auth with every request.
func (w WebTLS) Client(auth bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.CA, MinVersion: tls.VersionTLS12}}
	var rt http.RoundTripper = tr
	if auth {
		rt = basicAuth{user: w.User, password: w.Password, next: tr}
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}
}

type basicAuth struct {
	user, password string
	next           http.RoundTripper
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(r)
}
