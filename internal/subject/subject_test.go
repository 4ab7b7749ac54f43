package subject

import "testing"

func TestWithin(t *testing.T) {
	cases := []struct {
		sub, of string
		want    bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b", "a.*", true},
		{"a.*", "a.*", true},
		{"a.*", "a.b", false},
		{"a.b.c", "a.>", true},
		{"a.>", "a.>", true},
		{"a", "a.>", false},
		{"a.>", "a.*", false},
		{"a.b.c", "a.*", false},
		{"a.*.c", "a.>", true},
		{"a.b", ">", true},
		{"a.b", "a.b.c", false},
		{"loop.x.in", "loop.*.in", true},
		{"loop.x.out", "loop.*.in", false},
		{"loop", "loop.>", false},
		{"a*b.c", "a*b.c", true},
		{"ab.c", "a*b.c", false},
	}
	for _, c := range cases {
		if got := Within(c.sub, c.of); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.sub, c.of, got, c.want)
		}
	}
}
