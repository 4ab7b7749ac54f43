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

func TestOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*.c", "a.b.*", true},
		{"a.*.c", "a.b.d", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a", "a.>", false},
		{">", "x.y", true},
		{"a.b", "a.b.c", false},
		{"a.*", "a.b.c", false},
		{"nope.x", "ex1.>", false},
		{"ex1.>", "ex1.a", true},
	}
	for _, c := range cases {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Overlap(c.b, c.a); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}
