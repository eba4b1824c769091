package imapwatch

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrTLSOptions: contradictory TLS options.
var ErrTLSOptions = errors.New("imapwatch: contradictory TLS options")

// TLSConfig returns the Options.TLSConfig that trusts the PEM file caFile
// instead of the system roots (nil without it), or, insecure, nothing.
func TLSConfig(caFile string, insecure bool) (*tls.Config, error) {
	switch {
	case caFile != "" && insecure:
		return nil, fmt.Errorf("%w: a CA file and skipping verification contradict each other: the first verifies the certificate against the file, the second does not verify it", ErrTLSOptions)
	case insecure:
		return &tls.Config{InsecureSkipVerify: true}, nil
	case caFile == "":
		return nil, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cannot use the CA file %s: it holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool}, nil
}
