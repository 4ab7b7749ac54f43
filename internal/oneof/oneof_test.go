package oneof

import "testing"

type mode string

func TestCheck(t *testing.T) {
	if err := Check("mode", mode("b"), "a", "b", "c"); err != nil {
		t.Fatalf("a listed value: %v", err)
	}
	err := Check("mode", mode("d"), "a", "b", "c")
	if want := `unknown mode "d" (want a, b or c)`; err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		values []mode
		want   string
	}{
		{nil, ""},
		{[]mode{"a"}, "a"},
		{[]mode{"a", "b"}, "a or b"},
		{[]mode{"a", "b", "c", "d"}, "a, b, c or d"},
	} {
		if got := List(tc.values...); got != tc.want {
			t.Errorf("List(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	m := mode("a")
	if err := Parse(&m, []byte("c"), "mode", "a", "b", "c"); err != nil || m != "c" {
		t.Fatalf("Parse of a listed value: %q, %v", m, err)
	}
	err := Parse(&m, []byte("d"), "mode", "a", "b", "c")
	if want := `unknown mode "d" (want a, b or c)`; err == nil || err.Error() != want || m != "c" {
		t.Fatalf("Parse of an unlisted value: %q, %v; want it unchanged and %s", m, err, want)
	}
}
