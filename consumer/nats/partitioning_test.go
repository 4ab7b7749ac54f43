package nats

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestParsePartitioning: the filter of a partition keeps the literal
// tokens of the transform's destination, puts the partition in the
// partition token and a wildcard for every other function, as nats-server
// reads them; destinations that do not partition, or whose partitions no
// filter can select, are refused with the reason.
func TestParsePartitioning(t *testing.T) {
	for _, c := range []struct {
		dest    string
		n       int
		filter1 string // partition 1's filter
		err     string
	}{
		{dest: "ex.{{partition(4,1)}}.{{wildcard(1)}}", n: 4, filter1: "ex.1.*"},
		{dest: "c.{{ Partition( 4 , 1 ) }}.$1", n: 4, filter1: "c.1.*"},
		{dest: "{{partition(3,1,2)}}.a.{{wildcard(1)}}.b.{{wildcard(2)}}", n: 3, filter1: "1.a.*.b.*"},
		{dest: "gt.{{partition(16)}}.>", n: 16, filter1: "gt.1.>"},
		{dest: "x.{{left(1,2)}}.{{partition(2,1)}}.{{random(4)}}", n: 2, filter1: "x.*.1.*"},
		{dest: "x.{{partition(2,1)}}.{{splitFromLeft(1,2)}}.y", n: 2, filter1: "x.1.>"},
		{dest: "x.{{partition(2,1)}}.{{split(1,.)}}", n: 2, filter1: "x.1.>"},
		{dest: "$x.{{partition(2,1)}}.$1", n: 2, filter1: "$x.1.*"},
		{dest: "", err: "no subject transform"},
		{dest: "x.{{wildcard(1)}}", err: "no {{partition(N, ...)}} token"},
		{dest: "p{{partition(4,1)}}.{{wildcard(1)}}", err: "no {{partition(N, ...)}} token"},
		{dest: "x.{{split(1,-)}}.{{partition(2,1)}}", err: "before the partition token"},
		{dest: "x.{{partition(2,1)}}.{{partition(3,1)}}", err: "two partition functions"},
		{dest: "x.{{partition(0,1)}}.$1", err: `"0" is no number of partitions`},
		{dest: "x.{{partition(n,1)}}.$1", err: `"n" is no number of partitions`},
		{dest: "x.{{bogus(1)}}.{{partition(2,1)}}", err: "unknown mapping function {{bogus(1)}}"},
	} {
		var tr *jetstream.SubjectTransformConfig
		if c.dest != "" {
			tr = &jetstream.SubjectTransformConfig{Source: "src.>", Destination: c.dest}
		}
		p, err := parsePartitioning("s", tr)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "jetstream s") {
				t.Errorf("%s: error %v, want one naming the stream that says %q", c.dest, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.dest, err)
			continue
		}
		if p.n != c.n || p.filter(1) != c.filter1 {
			t.Errorf("%s: %d partitions, partition 1 filtered by %q; want %d and %q", c.dest, p.n, p.filter(1), c.n, c.filter1)
		}
	}
}
