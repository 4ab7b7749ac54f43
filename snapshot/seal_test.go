package snapshot

import (
	"bytes"
	"hash/crc32"
	"testing"
)

// TestSealInPlace: the envelope written around a body in place holds
// the bytes of the envelope encoded whole, with the body copied into it
// as a bin value, for bodies whose length takes each of msgpack's bin
// headers (8, 16 and 32 bits), and so does SealTemporary's.
func TestSealInPlace(t *testing.T) {
	for _, n := range []int{0, 1, 200, 255, 256, 65535, 65536, 1 << 20} {
		body := struct {
			V []byte `msgpack:"v"`
		}{V: bytes.Repeat([]byte{0xa5}, n)}
		var raw bytes.Buffer
		if err := encodeInto(&raw, &body); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := encodeInto(&want, &envelope{Format: Format, Checksum: crc32.ChecksumIEEE(raw.Bytes()), Body: raw.Bytes()}); err != nil {
			t.Fatal(err)
		}
		got, err := Seal(&body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("body of %d bytes: sealed %d bytes, want %d (head %x, want %x)", raw.Len(), len(got), want.Len(), got[:min(len(got), 24)], want.Bytes()[:24])
		}
		tmp, release, err := SealTemporary(&body, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tmp, want.Bytes()) {
			t.Errorf("body of %d bytes: SealTemporary gives other bytes than the envelope's", raw.Len())
		}
		release()
		if back, err := Unseal(got); err != nil || !bytes.Equal(back, raw.Bytes()) {
			t.Errorf("body of %d bytes: unsealed %d bytes, %v", raw.Len(), len(back), err)
		}
	}
}

// TestSealTemporaryDropsLargeBuffers: the buffer a model's state grew
// (4 MiB: 2^18 weights under AROW) goes to the collector once released,
// rather than back to the pool, where the small shard results sealed
// every epoch would keep it alive.
func TestSealTemporaryDropsLargeBuffers(t *testing.T) {
	type body struct {
		V []byte `msgpack:"v"`
	}
	const model = 4 << 20
	large, release, err := SealTemporary(&body{V: make([]byte, model)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cap(large) < model {
		t.Fatalf("a body of %d bytes sealed in %d bytes", model, cap(large))
	}
	release()
	for range 8 {
		small, release, err := SealTemporary(&body{V: make([]byte, 16)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cap(small) >= model {
			t.Fatalf("a small body sealed in the pooled buffer of %d bytes that a model's state grew", cap(small))
		}
		defer release()
	}
}
