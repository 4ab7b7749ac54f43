package main

import (
	"bufio"
	"io"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// decodeAll learns every example of r one by one, without the parallel
// reader: the reference that train is compared with.
func decodeAll(t *testing.T, r io.Reader, format string, cfg learner.Config, m *learner.Model) {
	t.Helper()
	d := wire.NewDecoder(cfg, wire.DecoderOptions{})
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if format == "msgpack" {
		sc.Split(wire.SplitMsgpack)
	}
	var x learner.Example
	for sc.Scan() {
		if _, err := d.Decode(sc.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		m.Learn(&x)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
