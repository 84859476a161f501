package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
// 127.0.0.1, ::1 and localhost signed by a CA of its own, and basic auth
// of one user (its password stored as a bcrypt hash, as the file needs).
type WebTLS struct {
	Dir            string // holds every file below
	ConfigFile     string // web-config.yml: the exporter's --web.config.file
	CAFile         string // ca.crt: the CA that signed the server's certificate (PEM)
	CertFile       string // server.crt
	KeyFile        string // server.key
	User, Password string
	CA             *x509.CertPool // the CA's certificate
}

// WebUser is the user NewWebTLS lets in.
const WebUser = "prometheus"

// NewWebTLS makes the certificates, the key and web-config.yml.
func NewWebTLS(t testing.TB) WebTLS {
	t.Helper()
	dir := t.TempDir()
	w := WebTLS{
		Dir: dir, ConfigFile: filepath.Join(dir, "web-config.yml"), CAFile: filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "server.crt"), KeyFile: filepath.Join(dir, "server.key"),
		User: WebUser, Password: rand.Text(),
	}
	caKey, caDER := certificate(t, nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "cfsprobe test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	})
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	w.CA = x509.NewCertPool()
	w.CA.AddCert(caCert)
	key, der := certificate(t, caCert, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(w.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// Relative paths: the toolkit reads them from the file's directory.
	config := fmt.Sprintf("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  %s: %s\n", w.User, hash)
	for name, data := range map[string][]byte{
		w.CAFile:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		w.CertFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		w.KeyFile:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		w.ConfigFile: []byte(config),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// certificate makes a key and a certificate of tmpl for it, signed by
// parent's key (self-signed when parent is nil), valid for a day.
func certificate(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
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
