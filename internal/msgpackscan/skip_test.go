package msgpackscan

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// randomValue is a random value of every msgpack type, nested at most
// depth deep.
func randomValue(rng *rand.Rand, depth int) any {
	n := 12
	if depth == 0 {
		n = 9
	}
	switch rng.IntN(n) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return rng.Int64() >> rng.IntN(64)
	case 3:
		return rng.Uint64() >> rng.IntN(64)
	case 4:
		return float32(rng.NormFloat64())
	case 5:
		return rng.NormFloat64()
	case 6:
		return strings.Repeat("s", rng.IntN([]int{32, 256, 70000}[rng.IntN(3)]))
	case 7:
		return make([]byte, rng.IntN([]int{256, 70000}[rng.IntN(2)]))
	case 8:
		return time.Unix(rng.Int64N(1<<40), rng.Int64N(1e9)) // extension -1
	case 9, 10:
		m := map[string]any{}
		for i := range rng.IntN(20) {
			m["k"+strconv.Itoa(i)] = randomValue(rng, depth-1)
		}
		return m
	default:
		a := make([]any, rng.IntN(20))
		for i := range a {
			a[i] = randomValue(rng, depth-1)
		}
		return a
	}
}

// TestSkipAgreesWithTheLibrary: Skip, and a Skipper bounded above the
// depth of the values, step over values that vmihailenco/msgpack encodes,
// and find every proper prefix of them Truncated.
func TestSkipAgreesWithTheLibrary(t *testing.T) {
	rng := newRand(5)
	s := Skipper{MaxDepth: 5}
	for range 300 {
		v, err := msgpack.Marshal(randomValue(rng, 4))
		if err != nil {
			t.Fatal(err)
		}
		data := append(bytes.Clone(v), 0xc1) // the next value is not read
		if end, st := Skip(data, 0); st != OK || end != len(v) {
			t.Fatalf("Skip: %d, status %d; want %d", end, st, len(v))
		}
		if end, st := s.Skip(data, 0); st != OK || end != len(v) {
			t.Fatalf("Skipper: %d, status %d; want %d", end, st, len(v))
		}
		for _, n := range []int{0, 1, len(v) / 2, len(v) - 1} {
			if n >= len(v) {
				continue
			}
			if _, st := Skip(v[:n], 0); st != Truncated {
				t.Fatalf("%d of %d bytes: status %d, want Truncated", n, len(v), st)
			}
		}
	}
}

// streamed walks data with a Stream, given in pieces of at most piece
// bytes, as a reader does that gives again a header a piece cut: the
// index after the value, whether it ended, and the status.
func streamed(data []byte, piece int) (int, bool, Status) {
	var s Stream
	at, held := 0, 0 // bytes walked; bytes given again
	for at+held < len(data) || held > 0 {
		end := min(at+held+piece, len(data))
		n, done, st := s.Feed(data[at:end])
		at += n
		if done || st != OK {
			return at, done, st
		}
		held = end - at
		if end == len(data) {
			break
		}
	}
	return at, false, OK
}

// TestStreamAgreesWithSkip: a Stream given a value in pieces of any size
// ends where Skip does, and a proper prefix does not end.
func TestStreamAgreesWithSkip(t *testing.T) {
	rng := newRand(7)
	for range 200 {
		v, err := msgpack.Marshal(randomValue(rng, 4))
		if err != nil {
			t.Fatal(err)
		}
		data := append(bytes.Clone(v), 0xc1)
		for _, piece := range []int{1, 2, 3, 5, 9, 64, 4096, len(data)} {
			if end, done, st := streamed(data, piece); !done || st != OK || end != len(v) {
				t.Fatalf("pieces of %d: %d, done %v, status %d; want %d, done", piece, end, done, st, len(v))
			}
		}
		if _, done, _ := streamed(v[:len(v)-1], 3); done {
			t.Fatalf("%d of %d bytes: done", len(v)-1, len(v))
		}
	}
	if end, _, st := streamed([]byte{0x93, 0x01, 0x91, 0xc1, 0x02}, 2); st != Invalid || end != 3 {
		t.Errorf("Stream: %d, status %d; want 3, Invalid", end, st)
	}
}

func TestSkipInvalid(t *testing.T) {
	data := []byte{0x93, 0x01, 0x91, 0xc1, 0x02}
	end, st := Skip(data, 0)
	if st != Invalid || end != 3 {
		t.Errorf("Skip: %d, status %d; want 3, Invalid", end, st)
	}
}

func TestSkipperDepth(t *testing.T) {
	// Each container type, nested depth deep around a nil.
	headers := map[string][]byte{
		"fixarray": {0x91},
		"fixmap":   {0x81, 0xa0},
		"array16":  {0xdc, 0, 1},
		"array32":  {0xdd, 0, 0, 0, 1},
		"map16":    {0xde, 0, 1, 0xa0},
		"map32":    {0xdf, 0, 0, 0, 1, 0xa0},
	}
	for name, h := range headers {
		nested := func(depth int) []byte { return append(bytes.Repeat(h, depth), 0xc0) }
		for _, max := range []int{1, 2, 10, 1000} {
			s := Skipper{MaxDepth: max}
			for _, depth := range []int{0, 1, max - 1, max} {
				v := nested(depth)
				if end, st := s.Skip(v, 0); st != OK || end != len(v) {
					t.Errorf("%s, MaxDepth %d, depth %d: %d, status %d; want %d", name, max, depth, end, st, len(v))
				}
			}
			for _, depth := range []int{max + 1, 3 * max} {
				v := nested(depth)
				// The container that opens with max open.
				if end, st := s.Skip(v, 0); st != TooDeep || end != max*len(h) {
					t.Errorf("%s, MaxDepth %d, depth %d: %d, status %d; want %d, TooDeep", name, max, depth, end, st, max*len(h))
				}
				if end, st := Skip(v, 0); st != OK || end != len(v) {
					t.Errorf("%s, depth %d, no bound: %d, status %d; want %d", name, depth, end, st, len(v))
				}
			}
		}
	}
	// Containers that close do not count: a wide value of shallow ones
	// (empty ones count, as in JSON) is 4 deep.
	wide := append([]byte{0xdc, 0x03, 0xe8}, bytes.Repeat([]byte{0x91, 0x91, 0x90}, 1000)...)
	if end, st := (&Skipper{MaxDepth: 4}).Skip(wide, 0); st != OK || end != len(wide) {
		t.Errorf("wide value: %d, status %d; want %d", end, st, len(wide))
	}
	if end, st := (&Skipper{MaxDepth: 3}).Skip(wide, 0); st != TooDeep || end != 5 {
		t.Errorf("wide value within 3: %d, status %d; want 5, TooDeep", end, st)
	}
}

func TestSkipperDoesNotAllocate(t *testing.T) {
	v, err := msgpack.Marshal(map[string]any{"a": []any{1, map[string]any{"b": []any{[]any{nil}}}}, "c": "d"})
	if err != nil {
		t.Fatal(err)
	}
	s := Skipper{MaxDepth: 1000}
	s.Skip(v, 0) // grows the scratch buffer
	allocs := testing.AllocsPerRun(100, func() {
		if _, st := s.Skip(v, 0); st != OK {
			t.Fatal(st)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

// FuzzSkip checks Skip against vmihailenco/msgpack, and a Skipper against
// Skip.
func FuzzSkip(f *testing.F) {
	f.Add([]byte{0x82, 0xa1, 'a', 0x93, 0x01, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0xa1, 'b', 0xd4, 0x01, 0x02})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a'})
	f.Add(append(bytes.Repeat([]byte{0x91}, 17), 0xc0))
	f.Add([]byte{0x92, 0xc1, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		end, st := Skip(data, 0)
		if st != Truncated && (end < 0 || end > len(data)) || st == TooDeep || st == WrongType {
			t.Fatalf("Skip: %d of %d bytes, status %d", end, len(data), st)
		}
		r := bytes.NewReader(data)
		libErr := msgpack.NewDecoder(r).Skip()
		if (libErr == nil) != (st == OK) || libErr == nil && len(data)-r.Len() != end {
			t.Fatalf("the library: %v after %d bytes; Skip: %d bytes, status %d", libErr, len(data)-r.Len(), end, st)
		}
		if st == Invalid && data[end] != 0xc1 {
			t.Fatalf("Invalid at byte %d, 0x%02x", end, data[end])
		}
		for _, piece := range []int{1, 7} {
			sEnd, done, sSt := streamed(data, piece)
			if done != (st == OK) || (st == OK || st == Invalid) && (sSt != st || sEnd != end) {
				t.Fatalf("Stream in pieces of %d: %d, done %v, status %d; Skip: %d, status %d", piece, sEnd, done, sSt, end, st)
			}
		}
		s := Skipper{MaxDepth: 16}
		bEnd, bSt := s.Skip(data, 0)
		switch {
		case bSt == TooDeep && !(Kind(data[bEnd]) == "array" || Kind(data[bEnd]) == "map"):
			t.Fatalf("TooDeep at byte %d, 0x%02x, which opens no container", bEnd, data[bEnd])
		case bSt != TooDeep && (bSt != st || bSt != Truncated && bEnd != end):
			t.Fatalf("Skipper: %d, status %d; Skip: %d, status %d", bEnd, bSt, end, st)
		}
	})
}

// BenchmarkSkip steps over values of every type, as the decoder steps over
// the values of keys it does not know.
func BenchmarkSkip(b *testing.B) {
	rng := newRand(9)
	var values [][]byte
	size := 0
	for range 64 {
		v, err := msgpack.Marshal(randomValue(rng, 2))
		if err != nil {
			b.Fatal(err)
		}
		values, size = append(values, v), size+len(v)
	}
	var s Skipper
	s.MaxDepth = 1000
	b.SetBytes(int64(size / len(values)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, st := s.Skip(values[i%len(values)], 0); st != OK {
			b.Fatal(st)
		}
	}
}
