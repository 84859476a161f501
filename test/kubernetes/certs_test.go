package kubernetes

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// pki is the node's certificate authority (testenv.PKI) and where its
// files are.
type pki struct{ *testenv.PKI }

// newPKI makes a CA in dir (ca.crt, ca.key) and the service accounts'
// signing key pair (sa.key, sa.pub).
func newPKI(dir string) (*pki, error) {
	ca, err := testenv.NewPKI(dir)
	if err != nil {
		return nil, err
	}
	// The service account tokens' key: RSA, which every component accepts.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := testenv.WritePEM(filepath.Join(dir, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	if err := testenv.WritePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return &pki{ca}, nil
}

// kubeconfig writes a kubeconfig at path for the API server at server,
// authenticating with name's certificate.
func (p *pki) kubeconfig(path, server, name string) error {
	s := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cfsprobe-test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: cfsprobe-test
  context:
    cluster: cfsprobe-test
    user: %s
current-context: cfsprobe-test
`, server, p.Path("ca", "crt"), name, p.Path(name, "crt"), p.Path(name, "key"), name)
	return os.WriteFile(path, []byte(s), 0o600)
}
