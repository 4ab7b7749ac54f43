package learner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
	"unsafe"
)

// digestVersion opens the encoding that Digest hashes; a change to the
// encoding changes it.
const digestVersion = "hyperplane/learner.State/v1"

// Digest is the SHA-256 of a canonical encoding of st: two states with
// the same digest hold the same model, configuration and counters, bit for
// bit, wherever and whenever they were stored. It covers everything in a
// State and nothing else: no model name, writer, time or generation.
//
// The encoding is a sequence of primitives, with no padding or separators:
//
//   - uint: 8 bytes, little-endian; an int is converted to uint64 first.
//   - float: the IEEE 754 bits of the float64 as a uint (so -0 and +0
//     differ, and every number of a valid state is finite).
//   - bool: one byte, 0 or 1.
//   - string: its length in bytes as a uint, then its bytes.
//   - a list: its length as a uint, then its elements; an index list
//     ([]uint32) has 4-byte little-endian elements. A nil and an empty
//     list encode alike.
//
// In this order:
//
//  1. the string "hyperplane/learner.State/v1";
//  2. the configuration in its canonical form (Config.Canonical: a setting
//     the algorithm does not read at a fixed value): algorithm (string),
//     bias (string), eta (float),
//     schedule (string), hash_bits (uint), hash_seed (uint), classes (list
//     of strings), normalize (bool), batch (uint), tau, c, lambda, arow_r
//     (floats), kernel (string), degree (uint), gamma, coef0 (floats),
//     budget, window (uints);
//  3. the counters: examples, labeled, mistakes, updates (uints), r2
//     (float), true_positives, false_positives, true_negatives,
//     false_negatives (uints), window (list of bools), window_next (uint);
//  4. the linear parts: weights, bias (float lists), scale, vnorm2
//     (floats), sum_weights, sum_bias, variance (float lists),
//     variance_bias (float), variance_biases (float list, only when not
//     empty: a multiclass AROW model's), pending_index (index list),
//     pending_value, pending_bias (float lists);
//  5. the kernel parts: support (a list whose elements are index (index
//     list), value (float list), coef, norm2 (floats)), support_next
//     (uint), kernel_r2 (float);
//  6. only when the detector's settings are not the defaults or its
//     state is not fresh: the string "drift", the settings enabled
//     (bool), delta, threshold (floats), min_examples (uint), and the
//     state n, low_n (uints), mean, low_mean, sum, low (floats), drifts,
//     restarted (uints);
//  7. only when the calibration is not empty (State.Calibration): the
//     string "calibration", parameters (float list), count (uint),
//     log_loss, brier (floats), bin_count, bin_events (lists of uints),
//     bin_sum (float list), auc_positive, auc_negative (lists of uints),
//     window_probability (float list), window_event (list of bools),
//     window_log_loss, window_brier (float lists);
//  8. only when the model has challengers: the string "challengers",
//     their number (uint), and for each its name (string), the 32 bytes
//     of its own state's Digest, then its comparison: for the log-loss's
//     sequence and then the errors', count (uint), sum, sum_scaled, v
//     (floats), then model_log_loss, model_errors, challenger_log_loss,
//     challenger_errors (floats).
//
// An unused part encodes as its zero value or as an empty list.
func (st *State) Digest() [32]byte {
	// Each challenger's state digests alone: beside the model's.
	return st.digest(nil)
}

// digest is Digest, or with since the step digest of DigestSince.
func (st *State) digest(since *Since) [32]byte {
	challengers := st.challengerDigests(since)
	e := digestEncoder{h: sha256.New(), buf: make([]byte, 0, 1<<14), since: since}
	if since == nil {
		e.str(digestVersion)
	} else {
		e.str(sinceVersion)
		e.grow(len(since.prev))
		e.buf = append(e.buf, since.prev[:]...)
	}

	canonical := st.Config.Canonical()
	c := &canonical
	e.str(string(c.Algorithm))
	e.str(string(c.Bias))
	e.float(c.Eta)
	e.str(string(c.Schedule))
	e.uint(uint64(c.HashBits))
	e.uint(c.HashSeed)
	e.uint(uint64(len(c.Classes)))
	for _, name := range c.Classes {
		e.str(name)
	}
	e.bool(c.Normalize)
	e.uint(uint64(c.Batch))
	e.float(c.Tau)
	e.float(c.C)
	e.float(c.Lambda)
	e.float(c.AROWR)
	e.str(string(c.Kernel))
	e.uint(uint64(c.Degree))
	e.float(c.Gamma)
	e.float(c.Coef0)
	e.uint(uint64(c.Budget))
	e.uint(uint64(c.Window))

	e.uint(st.Examples)
	e.uint(st.Labeled)
	e.uint(st.Mistakes)
	e.uint(st.Updates)
	e.float(st.R2)
	e.uint(st.TruePositives)
	e.uint(st.FalsePositives)
	e.uint(st.TrueNegatives)
	e.uint(st.FalseNegatives)
	e.uint(uint64(len(st.Window)))
	for _, ok := range st.Window {
		e.bool(ok)
	}
	e.uint(uint64(st.WindowNext))

	e.perWeight(st.Weights, 0)
	e.floats(st.Bias)
	e.float(st.Scale)
	e.float(st.VNorm2)
	e.perWeight(st.SumWeights, 1)
	e.floats(st.SumBias)
	e.perWeight(st.Variance, 2)
	e.float(st.VarianceBias)
	if len(st.VarianceBiases) > 0 {
		// Only a multiclass AROW model has them: a binary model's
		// digest is what it was before they existed.
		e.floats(st.VarianceBiases)
	}
	e.indices(st.PendingIndex)
	e.floats(st.PendingValue)
	e.floats(st.PendingBias)

	e.uint(uint64(len(st.Support)))
	for i := range st.Support {
		sv := &st.Support[i]
		e.indices(sv.Index)
		e.floats(sv.Value)
		e.float(sv.Coef)
		e.float(sv.Norm2)
	}
	e.uint(uint64(st.SupportNext))
	e.float(st.KernelR2)
	st.digestDrift(&e)
	st.digestCalibration(&e)
	st.digestChallengers(&e, challengers)
	st.digestPromotions(&e)

	e.flush()
	var sum [32]byte
	e.h.Sum(sum[:0])
	return sum
}

// StateSHA256 is Digest in lower-case hexadecimal: the state_sha256 of
// the scale-out protocol and of inspect.
func (st *State) StateSHA256() string {
	d := st.Digest()
	return hex.EncodeToString(d[:])
}

// digestEncoder buffers the encoding in front of the hash, so that a
// large state is hashed in large blocks.
type digestEncoder struct {
	h   hash.Hash
	buf []byte
	// since, when set, makes perWeight encode a vector's differences from
	// the state stepped from (DigestSince).
	since *Since
}

func (e *digestEncoder) grow(n int) {
	if len(e.buf)+n > cap(e.buf) {
		e.flush()
	}
}

func (e *digestEncoder) flush() {
	e.h.Write(e.buf)
	e.buf = e.buf[:0]
}

func (e *digestEncoder) uint(v uint64) {
	e.grow(8)
	e.buf = binary.LittleEndian.AppendUint64(e.buf, v)
}

func (e *digestEncoder) float(v float64) { e.uint(math.Float64bits(v)) }

func (e *digestEncoder) bool(v bool) {
	e.grow(1)
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *digestEncoder) str(s string) {
	e.uint(uint64(len(s)))
	e.flush()
	e.h.Write([]byte(s))
}

// floats encodes vs as float would each. On a little-endian machine the
// encoding is the slice's own memory, which is hashed where it lies;
// elsewhere it is written into the buffer a room at a time.
func (e *digestEncoder) floats(vs []float64) {
	e.uint(uint64(len(vs)))
	if len(vs) == 0 {
		return
	}
	if littleEndian {
		e.flush()
		e.h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&vs[0])), 8*len(vs)))
		return
	}
	for len(vs) > 0 {
		room := (cap(e.buf) - len(e.buf)) / 8
		if room == 0 {
			e.flush()
			room = cap(e.buf) / 8
		}
		n := min(room, len(vs))
		at := len(e.buf)
		e.buf = e.buf[:at+8*n]
		for i, v := range vs[:n] {
			binary.LittleEndian.PutUint64(e.buf[at+8*i:], math.Float64bits(v))
		}
		vs = vs[n:]
	}
}

// littleEndian is whether this machine stores a float64 as Digest
// encodes it: its IEEE 754 bits, least significant byte first.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

func (e *digestEncoder) indices(vs []uint32) {
	e.uint(uint64(len(vs)))
	for _, v := range vs {
		e.grow(4)
		e.buf = binary.LittleEndian.AppendUint32(e.buf, v)
	}
}
