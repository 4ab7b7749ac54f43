package wire_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestStartUnmarshalText: source.start's text, read once when the
// configuration is loaded, and written back as it was read.
func TestStartUnmarshalText(t *testing.T) {
	cases := []struct {
		in   string
		want wire.Start
		err  bool
	}{
		{in: "earliest", want: wire.Start{Kind: wire.StartEarliest}},
		{in: "latest", want: wire.Start{Kind: wire.StartLatest}},
		{in: "offset:0", want: wire.Start{Kind: wire.StartOffset}},
		{in: "offset:9223372036854775807", want: wire.Start{Kind: wire.StartOffset, Offset: 9223372036854775807}},
		{in: "time:2024-05-01T12:00:00Z", want: wire.Start{Kind: wire.StartTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}},
		{in: "time:2024-05-01T14:00:00.5+02:00", want: wire.Start{Kind: wire.StartTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 5e8, time.UTC)}},
		{in: "", err: true},
		{in: "Earliest", err: true},
		{in: "earliest:1", err: true},
		{in: "offset", err: true},
		{in: "offset:", err: true},
		{in: "offset:-1", err: true},
		{in: "offset:1.5", err: true},
		{in: "offset:9223372036854775808", err: true},
		{in: "time:", err: true},
		{in: "time:2024-05-01", err: true},
		{in: "time:1714564800", err: true},
		{in: "time:1970-01-01T00:00:00Z", want: wire.Start{Kind: wire.StartTime, Time: time.Unix(0, 0)}},
		{in: "time:2262-04-11T23:47:16Z", want: wire.Start{Kind: wire.StartTime, Time: time.Date(2262, 4, 11, 23, 47, 16, 0, time.UTC)}},
		{in: "time:1969-12-31T23:59:59Z", err: true},
		{in: "time:1900-01-01T00:00:00Z", err: true},
		{in: "time:2262-04-11T23:47:17Z", err: true},
		{in: "time:2999-01-01T00:00:00Z", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			before := wire.Start{Kind: wire.StartLatest}
			got := before
			err := got.UnmarshalText([]byte(tc.in))
			if tc.err {
				if err == nil {
					t.Fatalf("no error; got %+v", got)
				}
				if !strings.Contains(err.Error(), `"`+tc.in+`"`) {
					t.Errorf("error %q does not quote the text", err)
				}
				if got != before {
					t.Errorf("a failed UnmarshalText changed the start to %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want.Kind || got.Offset != tc.want.Offset || !got.Time.Equal(tc.want.Time) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			text, _ := got.MarshalText()
			var again wire.Start
			if err := again.UnmarshalText(text); err != nil || again.String() != got.String() || !again.Time.Equal(got.Time) {
				t.Errorf("%q read back as %+v, %v", text, again, err)
			}
		})
	}
}

// TestStartValidate: a start built in code is checked as the text is.
func TestStartValidate(t *testing.T) {
	for _, tc := range []struct {
		start wire.Start
		err   string // a substring; "" for valid
	}{
		{wire.Start{}, ""},
		{wire.Start{Kind: wire.StartOffset, Offset: 3}, ""},
		{wire.Start{Kind: wire.StartTime, Time: time.Now()}, ""},
		{wire.Start{Kind: "newest"}, `unknown start "newest"`},
		{wire.Start{Kind: wire.StartOffset, Offset: -1}, "negative"},
		{wire.Start{Kind: wire.StartTime}, "no time"},
		{wire.Start{Kind: wire.StartTime, Time: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}, "before 1970-01-01T00:00:00Z"},
		{wire.Start{Kind: wire.StartTime, Time: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}, "after 2262-04-11T23:47:16Z"},
	} {
		err := tc.start.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.start, err, tc.err)
		}
	}
	if got := (wire.Start{}).String(); got != "earliest" {
		t.Errorf("the zero Start is %q, want earliest", got)
	}
}
