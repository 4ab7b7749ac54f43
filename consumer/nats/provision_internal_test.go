package nats

import "testing"

func TestParseServerVersion(t *testing.T) {
	cases := []struct {
		version string
		want    [3]int
		ok      bool
	}{
		{"2.9.10", [3]int{2, 9, 10}, true},
		{"2.10.0", [3]int{2, 10, 0}, true},
		{"2.10.0-beta.1", [3]int{2, 10, 0}, true},
		{"2.15.2", [3]int{2, 15, 2}, true},
		{"v2.11.3+build", [3]int{2, 11, 3}, true},
		{"", [3]int{}, false},
		{"2.10", [3]int{}, false},
		{"two.ten.zero", [3]int{}, false},
	}
	for _, c := range cases {
		if got, ok := parseServerVersion(c.version); got != c.want || ok != c.ok {
			t.Errorf("parseServerVersion(%q) = %v, %v; want %v, %v", c.version, got, ok, c.want, c.ok)
		}
	}
}
