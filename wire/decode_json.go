package wire

import (
	"strconv"

	"github.com/hyperplane-ml/hyperplane/internal/jsonscan"
	"github.com/hyperplane-ml/hyperplane/learner"
)

// DecodeJSON decodes data, one JSON object (a line of JSON Lines; white
// space may surround it), into x, which it resets first and whose slices it
// reuses. The keys are those of DESIGN.md §3; unknown keys are skipped
// whatever their value (if it nests at most MaxDepth arrays and objects),
// so producers can add keys before the decoder knows them. A key that
// appears twice at the top level is an error; a feature name that appears
// twice inside "features" adds two features.
//
// Strings are unescaped before hashing (a lone UTF-16 surrogate becomes
// U+FFFD, as in encoding/json); invalid UTF-8 is hashed as it is.
//
// On error, x is reset and the error is a *DecodeError that names the field
// (or "example" and a byte offset) and the problem; when the input ends
// inside the object it wraps io.ErrUnexpectedEOF. Meta holds the id if it
// was read before the problem.
func (d *Decoder) DecodeJSON(data []byte, x *learner.Example) (Meta, error) {
	d.start(x)
	if len(data) > d.maxBytes {
		return Meta{}, d.sizeError(len(data))
	}
	meta, err := d.decodeJSON(data, x, false)
	if err != nil {
		x.Reset()
		return meta, err
	}
	return meta, nil
}

// decodeJSON decodes the object b into x; with deferHash, x.Index holds
// the offsets in b of the features' names instead of their weight
// indices, for hashNamesJSON to finish.
func (d *Decoder) decodeJSON(b []byte, x *learner.Example, deferHash bool) (Meta, *DecodeError) {
	var meta Meta
	i := jsonscan.SkipSpace(b, 0)
	if i == len(b) {
		return meta, syntaxError("example", b, i, "a JSON object")
	}
	if b[i] != '{' {
		if kind := jsonscan.KindAt(b, i); kind != "" {
			return meta, decodeErr("example", "not a JSON object (got %s)", kind)
		}
		return meta, syntaxError("example", b, i, "a JSON object")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		seen := 0
		for {
			if i >= len(b) || b[i] != '"' {
				return meta, syntaxError("example", b, i, "a key")
			}
			key, j, scanErr := jsonscan.String(b, i, &d.name)
			if scanErr != nil {
				return meta, jsonError("example", scanErr)
			}
			i = jsonscan.SkipSpace(b, j)
			if i >= len(b) || b[i] != ':' {
				return meta, syntaxError(quoteField(key), b, i, "':'")
			}
			i = jsonscan.SkipSpace(b, i+1)
			bit := keyBit(key)
			if seen&bit != 0 {
				return meta, duplicateKey(key)
			}
			seen |= bit
			var err *DecodeError
			switch bit {
			case keyID:
				i, err = d.jsonID(b, i, &meta)
			case keyLabel:
				i, err = d.jsonLabel(b, i, x)
			case keyFeatures:
				if deferHash {
					i, err = d.jsonFeatureNames(b, i, x)
				} else {
					i, err = d.jsonFeatures(b, i, x)
				}
			case keyX:
				i, err = d.jsonDense(b, i, x)
			case keyWeight:
				i, err = d.jsonWeight(b, i, x)
			default:
				d.noteUnknownKey(key)
				if i, scanErr = d.skipJSON.Skip(b, i); scanErr != nil {
					err = jsonError(quoteField(key), scanErr)
				}
			}
			if err != nil {
				return meta, err
			}
			i = jsonscan.SkipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = jsonscan.SkipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return meta, syntaxError("example", b, i, "',' or '}'")
		}
	}
	if err := d.checkUnknownKeys(); err != nil {
		return meta, err
	}
	if i = jsonscan.SkipSpace(b, i); i != len(b) {
		return meta, decodeErr("example", "unexpected %s after the object at byte %d", jsonscan.DescribeByte(b[i]), i)
	}
	return meta, nil
}

// jsonID reads the id at b[i]: a string, an integer or null.
func (d *Decoder) jsonID(b []byte, i int, meta *Meta) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("id", b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		s, j, err := jsonscan.String(b, i, &d.id)
		if err != nil {
			return j, jsonError("id", err)
		}
		if len(s) > MaxIDBytes {
			return j, idTooLarge(len(s))
		}
		meta.ID, meta.HasID = s, true
		return j, nil
	case jsonscan.StartsNumber(c):
		_, j, st := jsonscan.Number(b, i, learner.MaxValue)
		if st == jsonscan.NumSyntax {
			return j, numberError("id", b, i, j, st)
		}
		for _, c := range b[i:j] {
			if !jsonscan.StartsNumber(c) {
				return j, decodeErr("id", "%s is not a string or an integer", b[i:j]).because(ReasonType)
			}
		}
		if j-i > MaxIDBytes {
			return j, idTooLarge(j - i)
		}
		meta.ID, meta.HasID = b[i:j], true
		return j, nil
	case c == 'n':
		return literal(b, i, "null", "id")
	default:
		return i, typeError("id", b, i, "a string or an integer")
	}
}

// jsonLabel reads the label at b[i] into x.
func (d *Decoder) jsonLabel(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("label", b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		s, j, err := jsonscan.String(b, i, &d.value)
		if err != nil {
			return j, jsonError("label", err)
		}
		return j, d.labelName(x, s)
	case jsonscan.StartsNumber(c):
		v, j, st := jsonscan.Number(b, i, learner.MaxValue)
		if st == jsonscan.NumSyntax {
			return j, numberError("label", b, i, j, st)
		}
		if !d.labelNumber(x, v) {
			return j, d.badLabelNumber(v, numberText(b[i:j]))
		}
		return j, nil
	case c == 't':
		j, err := literal(b, i, "true", "label")
		if err == nil {
			err = d.labelBool(x, true)
		}
		return j, err
	case c == 'f':
		j, err := literal(b, i, "false", "label")
		if err == nil {
			err = d.labelBool(x, false)
		}
		return j, err
	case c == 'n':
		return literal(b, i, "null", "label")
	case c == '{' || c == '[':
		return i, d.badLabelType(jsonscan.Kind(c))
	default:
		return i, valueError("label", b, i)
	}
}

// jsonWeight reads the weight at b[i] into x.
func (d *Decoder) jsonWeight(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("weight", b, i, "a value")
	}
	switch c := b[i]; {
	case jsonscan.StartsNumber(c):
		v, j, st := jsonscan.Number(b, i, learner.MaxValue)
		if st == jsonscan.NumSyntax {
			return j, notANumber(numberError("weight", b, i, j, st), b, i)
		}
		if !setWeight(x, v) {
			return j, badWeight(numberText(b[i:j]))
		}
		return j, nil
	case c == 'n':
		j, err := literal(b, i, "null", "weight")
		if err != nil {
			return j, notANumber(err, b, i)
		}
		return j, nil
	default:
		return i, notANumber(typeError("weight", b, i, "a number"), b, i)
	}
}

// jsonFeatures reads the object of sparse features at b[i] into x. It is
// the hot loop of JSON decoding: it appends to local copies of x's slices
// (the compiler cannot keep x's fields in registers) and tries the short,
// unescaped names of typical producers without a call.
func (d *Decoder) jsonFeatures(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("features", b, i, "an object")
	}
	switch b[i] {
	case '{':
	case 'n':
		return literal(b, i, "null", "features")
	default:
		return i, typeError("features", b, i, "an object")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	index, value := x.Index, x.Value
	room := d.maxFeatures - len(index) - len(x.Dense)
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxError("features", b, i, "a feature name")
		}
		name, j, ok := jsonscan.ShortString(b, i)
		if !ok {
			var err *jsonscan.Error
			if name, j, err = jsonscan.String(b, i, &d.name); err != nil {
				return j, jsonError("features", err)
			}
		}
		i = j
		if i < len(b) && b[i] == ':' {
			i++
		} else if i = jsonscan.SkipSpace(b, i); i < len(b) && b[i] == ':' {
			i++
		} else {
			return i, syntaxError(featureField(name), b, i, "':'")
		}
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError(featureField(name), b, i, "a value")
		}
		if room == 0 {
			return i, d.tooManyFeatures("features")
		}
		room--
		switch c := b[i]; {
		case jsonscan.StartsNumber(c):
			v, j, st := jsonscan.Number(b, i, learner.MaxValue)
			if st != jsonscan.NumOK {
				return j, notANumber(numberError(featureField(name), b, i, j, st), b, i)
			}
			index = append(index, learner.Index(d.hasher, name))
			value = append(value, v)
			i = j
		case c == '"':
			s, j, err := jsonscan.String(b, i, &d.value)
			if err != nil {
				return j, jsonError(featureField(name), err)
			}
			index = append(index, learner.CategoricalIndex(d.hasher, name, s))
			value = append(value, 1)
			i = j
		default:
			return i, notANumber(typeError(featureField(name), b, i, "a number or string"), b, i)
		}
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
			continue
		}
		if i = jsonscan.SkipSpace(b, i); i < len(b) {
			switch b[i] {
			case ',':
				i = jsonscan.SkipSpace(b, i+1)
				continue
			case '}':
				x.Index, x.Value = index, value
				return i + 1, nil
			}
		}
		return i, syntaxError("features", b, i, "',' or '}'")
	}
}

// jsonFeatureNames is jsonFeatures with the hashing of the names left to
// hashAll: it appends to x.Index the offset in b of each feature's name
// (its opening quote). A loop of its own, so that jsonFeatures, the
// decoding of every message from a broker, keeps its registers.
func (d *Decoder) jsonFeatureNames(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("features", b, i, "an object")
	}
	switch b[i] {
	case '{':
	case 'n':
		return literal(b, i, "null", "features")
	default:
		return i, typeError("features", b, i, "an object")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	index, value := x.Index, x.Value
	room := d.maxFeatures - len(index) - len(x.Dense)
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxError("features", b, i, "a feature name")
		}
		at := i
		name, j, ok := jsonscan.ShortString(b, i)
		if !ok {
			var err *jsonscan.Error
			if name, j, err = jsonscan.String(b, i, &d.name); err != nil {
				return j, jsonError("features", err)
			}
		}
		i = jsonscan.SkipSpace(b, j)
		if i < len(b) && b[i] == ':' {
			i++
		} else {
			return i, syntaxError(featureField(name), b, i, "':'")
		}
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) {
			return i, syntaxError(featureField(name), b, i, "a value")
		}
		if room == 0 {
			return i, d.tooManyFeatures("features")
		}
		room--
		switch c := b[i]; {
		case jsonscan.StartsNumber(c):
			v, j, st := jsonscan.Number(b, i, learner.MaxValue)
			if st != jsonscan.NumOK {
				return j, notANumber(numberError(featureField(name), b, i, j, st), b, i)
			}
			index = append(index, uint32(at))
			value = append(value, v)
			i = j
		case c == '"':
			_, j, err := jsonscan.String(b, i, &d.value)
			if err != nil {
				return j, jsonError(featureField(name), err)
			}
			index = append(index, uint32(at))
			value = append(value, 1)
			i = j
		default:
			return i, notANumber(typeError(featureField(name), b, i, "a number or string"), b, i)
		}
		if i = jsonscan.SkipSpace(b, i); i < len(b) {
			switch b[i] {
			case ',':
				i = jsonscan.SkipSpace(b, i+1)
				continue
			case '}':
				x.Index, x.Value = index, value
				return i + 1, nil
			}
		}
		return i, syntaxError("features", b, i, "',' or '}'")
	}
}

// jsonDense reads the array of dense features at b[i] into x.
func (d *Decoder) jsonDense(b []byte, i int, x *learner.Example) (int, *DecodeError) {
	if i >= len(b) {
		return i, syntaxError("x", b, i, "an array")
	}
	switch b[i] {
	case '[':
	case 'n':
		return literal(b, i, "null", "x")
	default:
		return i, typeError("x", b, i, "an array")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, syntaxError(denseField(len(x.Dense)), b, i, "a number")
		}
		c := b[i]
		if !jsonscan.StartsNumber(c) {
			return i, notANumber(typeError(denseField(len(x.Dense)), b, i, "a number"), b, i)
		}
		v, j, st := jsonscan.Number(b, i, learner.MaxValue)
		if st != jsonscan.NumOK {
			return j, notANumber(numberError(denseField(len(x.Dense)), b, i, j, st), b, i)
		}
		if err := d.addDense(x, v); err != nil {
			return j, err
		}
		i = jsonscan.SkipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		return i, syntaxError("x", b, i, "',' or ']'")
	}
}

// denseField is the field name of the dense feature at position i.
func denseField(i int) string { return "x[" + strconv.Itoa(i) + "]" }

// The error constructors below are small enough to inline, but errors are
// rare: kept out of line, the decoding loops stay as small and fast as
// they were when the scanner was part of this package.

// jsonError is the error in field for the scanner's error e.
//
//go:noinline
func jsonError(field string, e *jsonscan.Error) *DecodeError {
	return &DecodeError{Field: field, Problem: e.Problem, err: e.Err}
}

// syntaxError is the error in field for malformed JSON at b[i]; want is
// what the grammar allows there.
//
//go:noinline
func syntaxError(field string, b []byte, i int, want string) *DecodeError {
	return jsonError(field, jsonscan.SyntaxError(b, i, want))
}

// typeError is the error in field for a value of the wrong type at b[i];
// want is what the field takes.
//
//go:noinline
func typeError(field string, b []byte, i int, want string) *DecodeError {
	return jsonError(field, jsonscan.TypeError(b, i, want)).because(ReasonType)
}

// valueError is the error in field for b[i], where a value must start and
// none does.
//
//go:noinline
func valueError(field string, b []byte, i int) *DecodeError {
	return jsonError(field, jsonscan.ValueError(b, i))
}

// numberError is the error in field for the number b[i:j] with status st:
// out of range for a feature value, or malformed.
func numberError(field string, b []byte, i, j int, st jsonscan.NumStatus) *DecodeError {
	if st == jsonscan.NumRange {
		return outOfRange(field, numberText(b[i:j]))
	}
	return jsonError(field, jsonscan.NumberError(b, i, j))
}

// notANumber is err, the error of the feature value, dense value or
// weight at b[i], classed out of range when that value is a NaN or an
// infinity as other languages write them (NaN, -Infinity, inf...): out of
// range, as the same value is in msgpack, not a type or syntax error.
//
//go:noinline
func notANumber(err *DecodeError, b []byte, i int) *DecodeError {
	if jsonscan.IsNotJSONNumber(b, i) {
		return err.because(ReasonOutOfRange)
	}
	return err
}

// literal checks that b[i:] starts with the literal lit (true, false or
// null) of field and returns the index after it.
func literal(b []byte, i int, lit, field string) (int, *DecodeError) {
	j, err := jsonscan.Literal(b, i, lit)
	if err != nil {
		return j, jsonError(field, err)
	}
	return j, nil
}
