package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a certificate authority a test made, valid for a day, and the
// directory of its files: ca.crt and ca.key, and NAME.crt and NAME.key
// for each certificate it issued (PEM, mode 0600).
type PKI struct {
	Dir  string
	CA   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64 // next serial number
}

// NewPKI makes a CA in dir (created if needed).
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cfsprobe-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CA: ca, key: key, next: 2}
	if err := p.write("ca", der, key); err != nil {
		return nil, err
	}
	return p, nil
}

// Path is the file of a name's certificate (ext "crt") or key ("key").
func (p *PKI) Path(name, ext string) string { return filepath.Join(p.Dir, name+"."+ext) }

// Pool holds the CA's certificate, for clients that trust it.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	return pool
}

// Issue makes name.crt and name.key: a client certificate for user cn in
// groups orgs, and a server certificate too when ips or dnsNames are given.
func (p *PKI) Issue(name, cn string, orgs []string, ips []net.IP, dnsNames []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(ips)+len(dnsNames) > 0 {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.next),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	p.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.key)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	return p.write(name, der, key)
}

func (p *PKI) write(name string, der []byte, key *ecdsa.PrivateKey) error {
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := WritePEM(p.Path(name, "crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return WritePEM(p.Path(name, "key"), "EC PRIVATE KEY", k)
}

// WritePEM writes one PEM block of type typ to path, mode 0600.
func WritePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
