package learner

// Hasher maps feature names to weight indices in [0, 2^bits).
//
// The hash is 64-bit FNV-1a whose offset basis is XORed with the seed,
// folded to bits with the xor-fold FNV recommends for power-of-two tables:
//
//	h := 0xcbf29ce484222325 ^ seed
//	for each byte c of the name: h ^= c; h *= 0x100000001b3 (mod 2^64)
//	index := (h ^ (h >> bits)) & (1<<bits - 1)
//
// A categorical feature (a string value v for the name n) is the feature
// named n + "=" + v, hashed the same way without building that string.
// Names are hashed as their UTF-8 bytes, after JSON unescaping.
// docs/snapshot-format.md restates this for programs in other languages.
type Hasher struct {
	seed uint64
	bits uint
	mask uint64
}

const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

// NewHasher returns a Hasher into 2^bits slots. bits must be in
// [1, MaxHashBits].
func NewHasher(bits int, seed uint64) Hasher {
	if bits < 1 || bits > MaxHashBits {
		panic("learner: hash bits out of range")
	}
	return Hasher{seed: seed, bits: uint(bits), mask: 1<<uint(bits) - 1}
}

// Bits is the number of index bits.
func (h Hasher) Bits() int { return int(h.bits) }

// Index is the weight index of the numeric feature name.
func Index[T string | []byte](h Hasher, name T) uint32 {
	s := fnvAdd(h.seed^fnvOffset64, name)
	return h.fold(s)
}

// CategoricalIndex is the weight index of the categorical feature
// name=value.
func CategoricalIndex[T string | []byte](h Hasher, name, value T) uint32 {
	s := fnvAdd(h.seed^fnvOffset64, name)
	s ^= '='
	s *= fnvPrime64
	s = fnvAdd(s, value)
	return h.fold(s)
}

func fnvAdd[T string | []byte](s uint64, b T) uint64 {
	for i := 0; i < len(b); i++ {
		s ^= uint64(b[i])
		s *= fnvPrime64
	}
	return s
}

func (h Hasher) fold(s uint64) uint32 {
	return uint32((s ^ s>>h.bits) & h.mask)
}
