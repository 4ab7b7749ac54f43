package serve

import "testing"

// TestSemver: the micro service's version is SemVer whatever the binary
// was stamped with.
func TestSemver(t *testing.T) {
	for v, want := range map[string]string{
		"v1.2.3":        "1.2.3",
		"1.2.3":         "1.2.3",
		"v1.2.3-rc.1+b": "1.2.3-rc.1+b",
		"dev":           "0.0.0-dev",
		"v1.2":          "0.0.0-dev",
		"":              "0.0.0-dev",
		"v01.2.3":       "0.0.0-dev",
	} {
		if got := semver(v); got != want {
			t.Errorf("semver(%q) = %q, want %q", v, got, want)
		}
	}
}
