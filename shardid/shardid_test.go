package shardid_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

func TestNamesAndSegments(t *testing.T) {
	for _, tc := range []struct {
		id          shardid.ID
		name, seg   string
		kind        shardid.Kind
		partition   int
		partitioned bool
	}{
		{shardid.Kafka("clicks", 0), "kafka:clicks/0", "kafka.clicks.0", shardid.KindKafka, 0, true},
		{shardid.Kafka("clicks.v2", 17), "kafka:clicks.v2/17", "kafka.clicks.v2.17", shardid.KindKafka, 17, true},
		{shardid.Kafka("a-b_c", 2147483647), "kafka:a-b_c/2147483647", "kafka.a-b_c.2147483647", shardid.KindKafka, 2147483647, true},
		{shardid.JetStream("EVENTS", 3), "jetstream:EVENTS#3", "jetstream.EVENTS.3", shardid.KindJetStream, 3, true},
		{shardid.Stream("EVENTS"), "jetstream:EVENTS", "jetstream.EVENTS", shardid.KindJetStream, -1, false},
		{shardid.Memory("log", 2), "memory:log/2", "memory.log.2", shardid.KindMemory, 2, true},
	} {
		if got := tc.id.String(); got != tc.name {
			t.Errorf("String() = %q, want %q", got, tc.name)
		}
		seg, err := tc.id.Segment()
		if err != nil || seg != tc.seg {
			t.Errorf("%s: Segment() = %q, %v; want %q", tc.name, seg, err, tc.seg)
		}
		parsed, err := shardid.Parse(tc.name)
		if err != nil || parsed != tc.id {
			t.Errorf("Parse(%q) = %#v, %v; want %#v", tc.name, parsed, err, tc.id)
		}
		if back, err := shardid.ParseSegment(tc.seg); err != nil || back != tc.id {
			t.Errorf("ParseSegment(%q) = %#v, %v; want %#v", tc.seg, back, err, tc.id)
		}
		if p, ok := parsed.Partition(); parsed.Kind() != tc.kind || ok != tc.partitioned || (ok && p != tc.partition) {
			t.Errorf("Parse(%q): kind %q, partition %d, %v", tc.name, parsed.Kind(), p, ok)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, name := range []string{
		"", "clicks/0", "kafka:clicks", "kafka:/0", "kafka:a/b/0", "kafka:clicks/01", "kafka:clicks/-1",
		"kafka:clicks/x", "kafka:clicks/", "jetstream:", "jetstream:EV.ENTS#1", "jetstream:EVENTS#", "jetstream:EVENTS#01",
		"jetstream:EVENTS/1", "nats:events", "kafka:cli\x00cks/0", `kafka:a\b/0`, "memory:log", "jetstream:A#1#2",
	} {
		id, err := shardid.Parse(name)
		if err == nil {
			t.Errorf("Parse(%q) = %#v, want an error", name, id)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("Parse(%q): %v does not quote the name", name, err)
		}
	}
}

func TestParseSegmentRefuses(t *testing.T) {
	for _, seg := range []string{
		"", "clicks.0", "kafka.clicks", "kafka..0", "kafka.clicks.01", "kafka.clicks.x", "kafka.clicks.", "kafka:clicks/0",
		"jetstream.", "jetstream.A.B.1", "jetstream.EVENTS.", "jetstream.EVENTS.01", "nats.events", "memory.log",
	} {
		id, err := shardid.ParseSegment(seg)
		if err == nil {
			t.Errorf("ParseSegment(%q) = %#v, want an error", seg, id)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(seg)) {
			t.Errorf("ParseSegment(%q): %v does not quote the segment", seg, err)
		}
	}
}

// TestSegmentRefuses: an ID made of a name no shard has has no segment,
// so that it can name no object.
func TestSegmentRefuses(t *testing.T) {
	for _, id := range []shardid.ID{
		{}, shardid.Kafka("a/b", 0), shardid.Kafka("", 0), shardid.Kafka("t", -1), shardid.JetStream("A.B", 0),
		shardid.Stream(`a\b`), shardid.Memory("log", -1),
	} {
		if seg, err := id.Segment(); err == nil {
			t.Errorf("%#v.Segment() = %q, want an error", id, seg)
		}
	}
}

func TestCompareOrder(t *testing.T) {
	want := []string{
		"jetstream:A", "jetstream:A#0", "jetstream:A#2", "jetstream:A#10", "jetstream:B#1",
		"kafka:a/0", "kafka:a/1", "kafka:a/9", "kafka:a/10", "kafka:a.b/0", "kafka:b/3",
	}
	var ids []shardid.ID
	for _, name := range slices.Backward(want) {
		id, err := shardid.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.SortFunc(ids, shardid.Compare)
	var got []string
	for _, id := range ids {
		got = append(got, id.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("shard order\n%q\nwant\n%q", got, want)
	}
}

// FuzzParse: a name Parse reads is the name of the ID it returns, and
// its segment is that of no other name.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"kafka:clicks/0", "jetstream:EVENTS#3", "jetstream:EVENTS", "memory:log/2", "kafka:a.b/1", "kafka:a/b/0"} {
		f.Add(s, "kafka:a/1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ia, errA := shardid.Parse(a)
		ib, errB := shardid.Parse(b)
		if errA != nil || errB != nil {
			return
		}
		if ia.String() != a || ib.String() != b {
			t.Fatalf("Parse(%q).String() = %q, Parse(%q).String() = %q", a, ia.String(), b, ib.String())
		}
		sa, errA := ia.Segment()
		sb, errB := ib.Segment()
		if errA != nil || errB != nil {
			t.Fatalf("segments of parsed names: %v, %v", errA, errB)
		}
		if (sa == sb) != (a == b) || (shardid.Compare(ia, ib) == 0) != (a == b) {
			t.Fatalf("%q and %q: segments %q and %q, order %d", a, b, sa, sb, shardid.Compare(ia, ib))
		}
	})
}

// FuzzParseSegment: a segment ParseSegment reads is the segment of the ID
// it returns.
func FuzzParseSegment(f *testing.F) {
	for _, s := range []string{"kafka.clicks.0", "kafka.a.b.1", "jetstream.EVENTS.3", "jetstream.EVENTS", "memory.log.2", "jetstream.A.B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seg string) {
		id, err := shardid.ParseSegment(seg)
		if err != nil {
			return
		}
		if again, err := id.Segment(); err != nil || again != seg {
			t.Fatalf("ParseSegment(%q).Segment() = %q, %v", seg, again, err)
		}
		if named, err := shardid.Parse(id.String()); err != nil || named != id {
			t.Fatalf("ParseSegment(%q) = %#v, whose name %q reads back as %#v, %v", seg, id, id.String(), named, err)
		}
	})
}
