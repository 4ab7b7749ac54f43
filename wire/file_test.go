package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func decoders() func() *wire.Decoder {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 16
	return func() *wire.Decoder { return wire.NewDecoder(cfg, wire.DecoderOptions{}) }
}

// stream is n generated records in format.
func stream(n int, format wire.Format) []byte {
	o := synth.DefaultOptions()
	o.Features, o.Unlabeled = 5, 0.1
	s := synth.New(o)
	var buf []byte
	for range n {
		if format == wire.FormatMsgpack {
			buf = synth.AppendMsgpack(buf, s.Next())
		} else {
			buf = synth.AppendJSON(buf, s.Next())
		}
	}
	return buf
}

// TestReadExamplesKeepsOrder reads with chunks far smaller than a record,
// so that records straddle chunks and the buffer grows, on several
// workers, and from a reader that returns a byte at a time, as a pipe
// whose writer is slow does (read live, each read is delivered as it
// comes): the records must still arrive once each, in order.
func TestReadExamplesKeepsOrder(t *testing.T) {
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"bytewise": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	}
	for _, format := range []wire.Format{wire.FormatJSON, wire.FormatMsgpack} {
		for _, chunk := range []int{7, 100, 4096} {
			for _, hint := range []wire.Format{format, wire.FormatAuto} {
				for name, reader := range readers {
					for _, live := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/chunk=%d/as=%s/read=%s/live=%t", format, chunk, hint, name, live), func(t *testing.T) {
							data := stream(500, format)
							var ids []string
							err := wire.ReadExamples(context.Background(), reader(data), decoders(), wire.ReadOptions{Format: hint, Workers: 3, ChunkSize: chunk, Live: live}, func(r *wire.Record) error {
								if r.Err != nil {
									return r.Err
								}
								if r.N != len(ids)+1 {
									return fmt.Errorf("record %d arrived as number %d", len(ids)+1, r.N)
								}
								ids = append(ids, string(r.Meta.ID))
								return nil
							})
							if err != nil {
								t.Fatal(err)
							}
							if len(ids) != 500 {
								t.Fatalf("%d records, want 500", len(ids))
							}
							for i, id := range ids {
								if id != fmt.Sprint(i+1) {
									t.Fatalf("record %d has id %s", i+1, id)
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestReadExamplesDeliversWhatAPipeHolds: read live, the records a
// pipe's writer has written reach fn while the writer holds the pipe
// open, not once a chunk has filled or the pipe has closed.
func TestReadExamplesDeliversWhatAPipeHolds(t *testing.T) {
	for _, format := range []wire.Format{wire.FormatJSON, wire.FormatMsgpack} {
		t.Run(string(format), func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			got := make(chan int, 2)
			done := make(chan error, 1)
			go func() {
				done <- wire.ReadExamples(context.Background(), r, decoders(), wire.ReadOptions{Format: format, Live: true}, func(rec *wire.Record) error {
					if rec.Err != nil {
						return rec.Err
					}
					got <- rec.N
					return nil
				})
			}()
			data := stream(2, format)
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			for want := 1; want <= 2; want++ {
				select {
				case n := <-got:
					if n != want {
						t.Fatalf("record %d where %d was due", n, want)
					}
				case err := <-done:
					t.Fatalf("returned %v with the pipe open", err)
				case <-time.After(time.Minute):
					t.Fatalf("record %d of %d bytes written not delivered in a minute, the pipe still open", want, len(data))
				}
			}
			w.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReadRecordsHandsRuns: ReadRecords hands the records in runs, none
// empty, that follow one another in order and together are every
// record; with chunks of many records, a run holds more than one.
func TestReadRecordsHandsRuns(t *testing.T) {
	for _, format := range []wire.Format{wire.FormatJSON, wire.FormatMsgpack} {
		for _, chunk := range []int{7, 4096} {
			t.Run(fmt.Sprintf("%s/chunk=%d", format, chunk), func(t *testing.T) {
				data := stream(500, format)
				next, runs, longest := 1, 0, 0
				err := wire.ReadRecords(context.Background(), bytes.NewReader(data), decoders(), wire.ReadOptions{Format: format, Workers: 3, ChunkSize: chunk}, func(recs []wire.Record) error {
					if len(recs) == 0 {
						return errors.New("an empty run")
					}
					for i := range recs {
						if recs[i].Err != nil {
							return recs[i].Err
						}
						if recs[i].N != next || string(recs[i].Meta.ID) != fmt.Sprint(next) {
							return fmt.Errorf("record %d (id %s) where %d was due", recs[i].N, recs[i].Meta.ID, next)
						}
						next++
					}
					runs, longest = runs+1, max(longest, len(recs))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if next != 501 {
					t.Fatalf("%d records, want 500", next-1)
				}
				if chunk == 4096 && longest < 2 {
					t.Errorf("%d runs of at most %d records from chunks of %d bytes", runs, longest, chunk)
				}
			})
		}
	}
}

func TestReadExamplesReportsBadRecordsAndGoesOn(t *testing.T) {
	in := "{\"label\":1,\"features\":{\"a\":1}}\n\n   \n{\"label\":\"x\"}\nnot json\n{\"label\":-1,\"x\":[1,2]}"
	var got []string
	err := wire.ReadExamples(context.Background(), strings.NewReader(in), decoders(), wire.ReadOptions{}, func(r *wire.Record) error {
		if r.Err != nil {
			got = append(got, fmt.Sprintf("%d:err", r.N))
		} else {
			got = append(got, fmt.Sprintf("%d:%d", r.N, r.Example.Label))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1:1 4:err 5:err 6:-1"; strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s (blank lines skipped, line numbers kept)", got, want)
	}
}

func TestReadExamplesTruncatedMsgpack(t *testing.T) {
	data := stream(10, wire.FormatMsgpack)
	n := 0
	err := wire.ReadExamples(context.Background(), bytes.NewReader(data[:len(data)-5]), decoders(), wire.ReadOptions{Format: wire.FormatMsgpack}, func(r *wire.Record) error {
		n++
		return r.Err
	})
	if err == nil || !strings.Contains(err.Error(), "record 10") {
		t.Fatalf("got %v, want an error naming record 10", err)
	}
	if n != 9 {
		t.Fatalf("%d records before the truncated one, want 9", n)
	}
}

func TestReadExamplesStopsOnCallbackError(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	err := wire.ReadExamples(context.Background(), bytes.NewReader(stream(5000, wire.FormatJSON)), decoders(), wire.ReadOptions{ChunkSize: 512}, func(*wire.Record) error {
		n++
		if n == 100 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 100 {
		t.Fatalf("got %v after %d records", err, n)
	}
}

func TestReadExamplesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := wire.ReadExamples(ctx, bytes.NewReader(stream(5000, wire.FormatJSON)), decoders(), wire.ReadOptions{ChunkSize: 512}, func(*wire.Record) error {
		n++
		if n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= 5000 {
		t.Fatalf("got %v after %d records", err, n)
	}
}

// TestReadExamplesAlso: every record also reaches fn decoded by the
// decoders of ReadOptions.Also, on the workers, as each would decode it
// alone; a record one of them refuses has its error.
func TestReadExamplesAlso(t *testing.T) {
	seeded := learner.DefaultConfig()
	seeded.HashSeed = 5
	tiny := learner.DefaultConfig()
	tiny.HashBits = 2 // 4 dense positions
	also := []func() *wire.Decoder{
		func() *wire.Decoder { return wire.NewDecoder(seeded, wire.DecoderOptions{}) },
		func() *wire.Decoder { return wire.NewDecoder(tiny, wire.DecoderOptions{}) },
	}
	for _, format := range []wire.Format{wire.FormatJSON, wire.FormatMsgpack} {
		t.Run(string(format), func(t *testing.T) {
			data := stream(300, format)
			alone := wire.NewDecoder(seeded, wire.DecoderOptions{})
			records := 0
			err := wire.ReadExamples(context.Background(), bytes.NewReader(data), decoders(), wire.ReadOptions{Workers: 2, ChunkSize: 512, Also: also}, func(r *wire.Record) error {
				records++
				if r.Err != nil {
					return r.Err
				}
				if len(r.Also) != 2 {
					return fmt.Errorf("record %d: %d more examples, want 2", r.N, len(r.Also))
				}
				var want learner.Example
				if _, err := alone.Decode(r.Payload, &want); err != nil {
					return err
				}
				got := r.Also[0]
				if fmt.Sprint(got.Index, got.Value, got.Labeled, got.Label) != fmt.Sprint(want.Index, want.Value, want.Labeled, want.Label) {
					return fmt.Errorf("record %d: decoded with seed 5 on the workers %v, alone %v", r.N, got, want)
				}
				if fmt.Sprint(got.Index) == fmt.Sprint(r.Example.Index) {
					return fmt.Errorf("record %d: seed 5 hashed as seed 0", r.N)
				}
				return nil
			})
			if err != nil || records != 300 {
				t.Fatalf("%d records: %v", records, err)
			}
		})
	}
	var errs []error
	err := wire.ReadExamples(context.Background(), strings.NewReader(`{"label":1,"x":[1,2,3,4,5]}`+"\n"+`{"label":1,"x":[1,2]}`+"\n"), decoders(),
		wire.ReadOptions{Also: also}, func(r *wire.Record) error { errs = append(errs, r.Err); return nil })
	var de *wire.DecodeError
	if err != nil || len(errs) != 2 || !errors.As(errs[0], &de) || errs[1] != nil {
		t.Errorf("errors %v (%v): want the first record refused by the decoder of 4 dense positions, the second read", errs, err)
	}
}

// TestReadRecordsExamplesApart reads records whose feature counts vary
// from 0 to 300, bad ones among them, in chunks reused many times: every
// example of a run, looked at once the whole run is decoded, must be what
// DecodeJSON makes of its line alone, none of them overwritten by the
// next (their features share one backing per chunk).
func TestReadRecordsExamplesApart(t *testing.T) {
	var data []byte
	rng := uint64(1)
	next := func(n uint64) uint64 {
		rng = rng*6364136223846793005 + 1442695040888963407
		return (rng >> 33) % n
	}
	for k := range 3000 {
		data = fmt.Appendf(data, `{"id":"%d","label":%d,"features":{`, k, 2*next(2)-1)
		// Mostly few features, now and then many: a chunk's later use
		// meets more than its first did.
		n := next(8)
		if next(20) == 0 {
			n = 50 + next(250)
		}
		for j := range n {
			if j > 0 {
				data = append(data, ',')
			}
			data = fmt.Appendf(data, `"f%d":0.%d`, next(1000), next(10000))
		}
		data = append(data, '}')
		if next(10) == 0 {
			data = append(data, `,"x":[0.5,-1]`...)
		}
		if next(50) == 0 {
			data = append(data, `,"label":1`...) // a duplicate key: an error
		}
		data = append(data, "}\n"...)
	}
	ref := decoders()()
	for _, chunk := range []int{256, 4096, 1 << 16} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			seen, bad := 0, 0
			err := wire.ReadRecords(context.Background(), bytes.NewReader(data), decoders(), wire.ReadOptions{Format: wire.FormatJSON, Workers: 2, ChunkSize: chunk}, func(recs []wire.Record) error {
				for i := range recs {
					r := &recs[i]
					var want learner.Example
					_, wantErr := ref.DecodeJSON(r.Payload, &want)
					if (r.Err == nil) != (wantErr == nil) {
						return fmt.Errorf("record %d: error %v, alone %v", r.N, r.Err, wantErr)
					}
					if r.Err != nil {
						bad++
						continue
					}
					if !slices.Equal(r.Example.Index, want.Index) || !slices.Equal(r.Example.Value, want.Value) || !slices.Equal(r.Example.Dense, want.Dense) || r.Example.Label != want.Label {
						return fmt.Errorf("record %d: %+v, alone %+v", r.N, *r.Example, want)
					}
				}
				seen += len(recs)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen != 3000 || bad == 0 {
				t.Fatalf("%d records, %d bad; want 3000, some bad", seen, bad)
			}
		})
	}
}

// TestReadExamplesRefusesJSONAsMsgpack: JSON lines read with the format
// msgpack stop at once, saying why, rather than giving a record of every
// byte that is no example.
func TestReadExamplesRefusesJSONAsMsgpack(t *testing.T) {
	data := append([]byte("\n  "), stream(50, wire.FormatJSON)...)
	n := 0
	err := wire.ReadExamples(context.Background(), bytes.NewReader(data), decoders(), wire.ReadOptions{Format: wire.FormatMsgpack}, func(r *wire.Record) error {
		n++
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "begins with '{'") || !strings.Contains(err.Error(), "jsonl") {
		t.Fatalf("JSON lines read as msgpack: %v after %d records, want an error naming the format", err, n)
	}
	if n != 0 {
		t.Errorf("%d records of JSON text read as msgpack, want none", n)
	}
}

// repeated reads n copies of b.
type repeated struct {
	b byte
	n int
}

func (r *repeated) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range k {
		p[i] = r.b
	}
	r.n -= k
	return k, nil
}

// TestReadExamplesSkipsARecordOverTheLimit: a JSON line or msgpack value
// far longer than an example may be is refused as too large, naming its
// size, without being held, and the records after it are read on; a
// msgpack value the input ends inside is an error naming it.
func TestReadExamplesSkipsARecordOverTheLimit(t *testing.T) {
	const pad = 64 << 20
	mp := func(v map[string]any) string {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	str32 := string(binary.BigEndian.AppendUint32([]byte{0xdb}, pad))
	for _, tc := range []struct {
		name                      string
		first, open, close, after string
		want                      string // the error, if any
	}{
		{name: "jsonl", first: "{\"label\":1,\"features\":{\"a\":1}}\n", open: "{\"label\":1,\"pad\":\"", close: "\"}\n",
			after: "{\"label\":-1,\"features\":{\"c\":1}}\n"},
		{name: "jsonl, the last line", first: "{\"label\":1,\"features\":{\"a\":1}}\n", open: "{\"label\":1,\"pad\":\"", close: "\"}"},
		{name: "msgpack", first: mp(map[string]any{"label": 1, "features": map[string]any{"a": 1}}),
			open: "\x82\xa5label\x01\xa3pad" + str32, after: mp(map[string]any{"label": -1, "features": map[string]any{"c": 1}})},
		{name: "msgpack, truncated", first: mp(map[string]any{"label": 1, "features": map[string]any{"a": 1}}),
			open: "\x82\xa5label\x01\xa3pad" + str32[:3] + "\xff\xff" + str32[3:], want: "record 2: the input ends inside it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := io.MultiReader(strings.NewReader(tc.first+tc.open), &repeated{'x', pad}, strings.NewReader(tc.close+tc.after))
			var got []string
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := wire.ReadExamples(context.Background(), in, decoders(), wire.ReadOptions{}, func(r *wire.Record) error {
				if r.Err != nil {
					got = append(got, fmt.Sprintf("%d:%v", r.N, r.Err))
				} else {
					got = append(got, fmt.Sprintf("%d:%d", r.N, r.Example.Label))
				}
				return nil
			})
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > pad/4 {
				t.Fatalf("reading a record of %d MiB allocated %d MiB: it was held", pad>>20, alloc>>20)
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !slices.Equal(got, []string{"1:1"}) {
					t.Fatalf("got %q and %v, want record 1 and an error naming %q", got, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			size := len(tc.open) + pad + len(tc.close)
			want := []string{"1:1", fmt.Sprintf("2:payload: %d bytes exceed the limit of %d", size, wire.DefaultMaxBytes)}
			if tc.after != "" {
				want = append(want, "3:-1")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
