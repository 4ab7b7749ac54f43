package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
)

// TestTLSClient: TLS off is no configuration; on, a CA file that is
// missing or holds no certificate is refused with its name.
func TestTLSClient(t *testing.T) {
	if tc, err := (config.TLS{CAFile: "ignored"}).Client(); tc != nil || err != nil {
		t.Errorf("TLS off: %v, %v; want nil, nil", tc, err)
	}
	tc, err := config.TLS{Enabled: true, InsecureSkipVerify: true}.Client()
	if err != nil || tc == nil || !tc.InsecureSkipVerify || tc.RootCAs != nil {
		t.Errorf("TLS on with the system's CAs: %+v, %v", tc, err)
	}
	dir := t.TempDir()
	if _, err := (config.TLS{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}).Client(); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing CA file: %v, want an error naming it", err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (config.TLS{Enabled: true, CAFile: notPEM}).Client(); err == nil || !strings.Contains(err.Error(), "ca.pem") {
		t.Errorf("a CA file without certificates: %v, want an error naming it", err)
	}
}
