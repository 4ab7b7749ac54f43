package wire

import (
	"math"

	"github.com/hyperplane-ml/hyperplane/internal/jsonscan"
	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// DecodeHashings is Decode for several hashings at once: it decodes data
// into x as d would in format and, when d accepts it, into each also[k] as
// others[k] would. Every one of others must be a Decoder of a
// configuration that differs from d's only in its hashing (hash_bits,
// hash_seed) and have d's DecoderOptions: the example is read once, and
// each feature's name hashed under every hashing in the same pass.
//
// format is FormatJSON to decode as DecodeJSON does, FormatMsgpack as
// DecodeMsgpack does with nothing after the map (a worker's message),
// anything else as Decode does. The error is d's; when it is not nil,
// also are left as they were. errs[k] is set to others[k]'s refusal of an
// example that d accepts (a dense part longer than its dimension, the
// only check that depends on the hashing), in which case also[k] is
// reset, or to nil. also and errs must be as long as others.
func (d *Decoder) DecodeHashings(data []byte, format Format, x *learner.Example, others []*Decoder, also []*learner.Example, errs []error) (Meta, error) {
	decode := d.Decode
	switch format {
	case FormatJSON:
		decode = d.DecodeJSON
	case FormatMsgpack:
		decode = d.decodeWholeMsgpack
	}
	if uint64(len(data)) > math.MaxUint32 || len(data) > d.maxBytes {
		// Offsets of names do not fit x.Index, or the size check
		// refuses it: decode once per hashing.
		meta, err := decode(data, x)
		if err == nil {
			for k, o := range others {
				_, errs[k] = o.Decode(data, also[k])
			}
		}
		return meta, err
	}
	i := 0
	if format != FormatMsgpack {
		i = jsonscan.SkipSpace(data, 0)
	}
	if i == len(data) || !(data[i] == '{' && format != FormatMsgpack || format != FormatJSON && msgpackscan.IsMap(data[i])) {
		return decode(data, x) // its error
	}
	b := data[i:]
	var meta Meta
	if data[i] == '{' {
		b = data
		d.start(x)
		var derr *DecodeError
		if meta, derr = d.decodeJSON(b, x, true); derr != nil {
			x.Reset()
			return meta, derr
		}
	} else {
		n, m, err := d.decodeMsgpackFront(b, x, true)
		if err != nil {
			return m, err
		}
		if format == FormatMsgpack && n != len(b) {
			x.Reset()
			return m, decodeErr("example", "%d bytes after the msgpack map", len(b)-n)
		}
		if end := jsonscan.SkipSpace(data, i+n); end != len(data) {
			x.Reset()
			return m, decodeErr("example", "%d bytes follow the msgpack map (at byte %d)", len(data)-end, end)
		}
		meta = m
	}
	d.hashAll(b, data[i] == '{', x, others, also, errs)
	return meta, nil
}

// decodeWholeMsgpack is DecodeMsgpack of data that holds one map and
// nothing after it, as a worker decodes a message. A message over the size
// limit is refused for its size before anything else, as DecodeJSON and
// Decode refuse it: a stream's map may end before the limit, a message's
// cannot.
func (d *Decoder) decodeWholeMsgpack(data []byte, x *learner.Example) (Meta, error) {
	if len(data) > d.maxBytes {
		d.start(x)
		return Meta{}, d.sizeError(len(data))
	}
	n, meta, err := d.DecodeMsgpack(data, x)
	if err == nil && n != len(data) {
		err = decodeErr("example", "%d bytes after the msgpack map", len(data)-n)
	}
	return meta, err
}

// hashAll finishes the example x that d decoded from b (a JSON object if
// json is set, else a msgpack map) with the hashing of its names
// deferred, and each of also as others[k] would decode b: each name is
// found once and hashed with d's hasher into x and with others[k]'s into
// also[k], whose other fields are x's. errs[k] says whether others[k]
// refuses the example (see DecodeHashings).
func (d *Decoder) hashAll(b []byte, json bool, x *learner.Example, others []*Decoder, also []*learner.Example, errs []error) {
	for k, o := range others {
		a := also[k]
		a.Reset()
		if len(x.Dense) > o.dim {
			errs[k] = o.tooManyValues()
			continue
		}
		errs[k] = nil
		a.Index = append(a.Index, x.Index...)
		a.Value = append(a.Value, x.Value...)
		a.Dense = append(a.Dense, x.Dense...)
		a.Labeled, a.Label, a.Weight = x.Labeled, x.Label, x.Weight
	}
	for f, at := range x.Index {
		var name, value []byte
		var categorical bool
		if json {
			name, value, categorical = d.jsonNameAt(b, int(at))
		} else {
			name, value, categorical = msgpackNameAt(b, int(at))
		}
		if categorical {
			x.Index[f] = learner.CategoricalIndex(d.hasher, name, value)
			for k, o := range others {
				if errs[k] == nil {
					also[k].Index[f] = learner.CategoricalIndex(o.hasher, name, value)
				}
			}
			continue
		}
		x.Index[f] = learner.Index(d.hasher, name)
		for k, o := range others {
			if errs[k] == nil {
				also[k].Index[f] = learner.Index(o.hasher, name)
			}
		}
	}
}

// jsonNameAt is the name of the feature whose name's opening quote is at
// b[i], in an object that decoded, and its value if it is a string
// (categorical). The name and the value may be in d's scratch buffers.
func (d *Decoder) jsonNameAt(b []byte, i int) (name, value []byte, categorical bool) {
	name, j, ok := jsonscan.ShortString(b, i)
	if !ok {
		name, j, _ = jsonscan.String(b, i, &d.name)
	}
	j = jsonscan.SkipSpace(b, j)   // to the ':'
	j = jsonscan.SkipSpace(b, j+1) // to the value
	if b[j] != '"' {
		return name, nil, false
	}
	value, _, _ = jsonscan.String(b, j, &d.value)
	return name, value, true
}

// msgpackNameAt is the name of the feature whose name starts at b[i], in
// a map that decoded, and its value if it is a string (categorical), as
// hashNames reads them.
func msgpackNameAt(b []byte, i int) (name, value []byte, categorical bool) {
	if c := b[i]; c&0xe0 == 0xa0 { // fixstr, as mpFeatures' fast path
		end := i + 1 + int(c&0x1f)
		name, i = b[i+1:end], end
	} else {
		name, i, _ = msgpackscan.String(b, i)
	}
	if i < len(b) && msgpackscan.IsString(b[i]) {
		value, _, _ = msgpackscan.String(b, i)
		return name, value, true
	}
	return name, nil, false
}
