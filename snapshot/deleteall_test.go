package snapshot_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestDeleteAllConcurrent: two workers retire the same part of an epoch
// log at once, as each does after writing a generation. Neither fails
// on an object the other deleted while it listed.
func TestDeleteAllConcurrent(t *testing.T) {
	ctx := context.Background()
	s, err := snapshot.OpenStore(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const epochs = 500
	prefix := func(e int) string { return fmt.Sprintf("clicks/epochs/%020d/shard/", e) }
	for e := range epochs {
		for i := range 4 {
			if err := s.CreateIfAbsent(ctx, fmt.Sprintf("%skafka.examples.%d.msgpack", prefix(e), i), []byte("r")); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range epochs {
				if err := s.DeleteAll(ctx, prefix(e)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", w, err)
		}
	}
	for e := range epochs {
		if ok, err := s.ObjectExists(ctx, prefix(e)+"kafka.examples.0.msgpack"); err != nil || ok {
			t.Fatalf("epoch %d: an object is left (%v, %v)", e, ok, err)
		}
	}
}

// TestGenerationsWhileRetained: a worker lists a model's generations
// while another retains them; the listing never fails on a generation
// deleted while it read the directory.
func TestGenerationsWhileRetained(t *testing.T) {
	ctx := context.Background()
	s, err := snapshot.OpenStore(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const gens = 1500
	for g := range gens {
		if err := s.CreateIfAbsent(ctx, snapshot.Key("", "clicks", uint64(g+1)), []byte("g")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		for keep := gens - 1; keep >= 1; keep -= 50 {
			if err := s.Retain(ctx, "clicks", keep); err != nil {
				done <- err
				return
			}
		}
		done <- s.Retain(ctx, "clicks", 1)
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("retain: %v", err)
			}
			return
		default:
		}
		if _, err := s.Generations(ctx, "clicks"); err != nil {
			t.Fatalf("generations while another worker retains them: %v", err)
		}
	}
}
