package dovecottest

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

// tlsFiles are the PEM files of a server with Options.TLS.
type tlsFiles struct {
	ca        *x509.Certificate
	caFile    string
	cert, key string
}

// issue creates, in dir, a throw-away CA and a server certificate it signed
// for 127.0.0.1, ::1 and localhost; ECDSA P-256 is quick to generate.
func issue(dir string) (tlsFiles, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("cannot generate the CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "dovecottest throw-away CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("cannot create the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tlsFiles{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("cannot generate the server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tlsFiles{}, fmt.Errorf("cannot create the server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tlsFiles{}, err
	}
	f := tlsFiles{
		ca:     ca,
		caFile: filepath.Join(dir, "ca.pem"),
		cert:   filepath.Join(dir, "cert.pem"),
		key:    filepath.Join(dir, "key.pem"),
	}
	for _, w := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{f.caFile, "CERTIFICATE", caDER, 0o644},
		{f.cert, "CERTIFICATE", der, 0o644},
		{f.key, "PRIVATE KEY", keyDER, 0o600},
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der})
		if err := os.WriteFile(w.path, b, w.mode); err != nil {
			return tlsFiles{}, err
		}
	}
	return f, nil
}

// serial returns a random 127-bit serial number (RFC 5280 section
// 4.1.2.2: positive, at most 20 octets).
func serial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand, Go 1.24 and later)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

// CAPool returns a pool holding only the server's CA (nil without TLS).
func (s *Server) CAPool() *x509.CertPool {
	if s.ca == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(s.ca)
	return p
}

// CAFile returns the PEM file of that CA ("" without TLS).
func (s *Server) CAFile() string { return s.caFile }
