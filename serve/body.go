package serve

import (
	"errors"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/internal/jsonscan"
	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
)

// shape is how a request body holds its examples; the reply has the same.
type shape uint8

const (
	shapeOne   shape = iota // one example: one reply
	shapeArray              // a JSON or msgpack array of examples: an array of replies
	shapeLines              // JSON lines, or msgpack maps end to end: replies likewise
)

// maxDepth bounds the nesting of a request's values, as the example
// decoder bounds an example's.
const maxDepth = 1000

// splitter finds the examples of a request body without decoding them. It
// keeps the skippers' scratch buffers between requests.
type splitter struct {
	json    jsonscan.Skipper
	msgpack msgpackscan.Skipper
	spans   [][2]int
	// max, if not 0, is the most examples a body may hold: past it the
	// splitter counts examples without keeping their spans, so that a
	// body of empty examples, three bytes or one each, takes no more
	// memory than one within the bound.
	max int
	// count is the examples found so far.
	count int
}

// tooManyError is a body of n examples, more than the splitter's max.
type tooManyError struct{ n, max int }

func (e *tooManyError) Error() string {
	return fmt.Sprintf("the body's %d examples exceed serve.max_examples, %d", e.n, e.max)
}

// split returns the shape of body and the span of each example in it, in
// order. msgpack says the body is msgpack; otherwise it is JSON. An error
// names the byte where the body stops making sense; a body that makes
// sense but holds more than max examples is a *tooManyError.
func (s *splitter) split(body []byte, msgpack bool) (shape, [][2]int, error) {
	s.json.MaxDepth, s.msgpack.MaxDepth = maxDepth, maxDepth
	s.spans, s.count = s.spans[:0], 0
	var (
		shp   shape
		spans [][2]int
		err   error
	)
	if msgpack {
		shp, spans, err = s.splitMsgpack(body)
	} else {
		shp, spans, err = s.splitJSON(body)
	}
	if err == nil && s.max > 0 && s.count > s.max {
		return 0, nil, &tooManyError{n: s.count, max: s.max}
	}
	return shp, spans, err
}

// add notes the example b[start:end], keeping its span up to max.
func (s *splitter) add(start, end int) {
	s.count++
	if s.max == 0 || s.count <= s.max {
		s.spans = append(s.spans, [2]int{start, end})
	}
}

func (s *splitter) splitJSON(b []byte) (shape, [][2]int, error) {
	i := jsonscan.SkipSpace(b, 0)
	if i == len(b) {
		return 0, nil, fmt.Errorf("empty body: want a JSON object, an array of objects or JSON lines")
	}
	if k := msgpackscan.Kind(b[i]); k == "map" || k == "array" {
		// No JSON text begins with these bytes: the body is msgpack sent
		// without its content type.
		return 0, nil, fmt.Errorf("the body begins with %s, as a msgpack %s does, and no JSON text does: it is read as JSON; send msgpack with Content-Type: %s", jsonscan.DescribeByte(b[i]), k, ContentTypeMsgpack)
	}
	if b[i] == '[' {
		i = jsonscan.SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return shapeArray, s.spans, s.trailing(b, i+1)
		}
		for {
			end, err := s.json.Skip(b, i)
			if err != nil {
				return 0, nil, &exampleError{n: s.count + 1, start: i, err: err}
			}
			s.add(i, end)
			i = jsonscan.SkipSpace(b, end)
			switch {
			case i == len(b):
				return 0, nil, fmt.Errorf("the array is not closed: want ',' or ']' at byte %d", i)
			case b[i] == ']':
				return shapeArray, s.spans, s.trailing(b, i+1)
			case b[i] != ',':
				return 0, nil, fmt.Errorf("after example %d: want ',' or ']' at byte %d, got %s", s.count, i, jsonscan.DescribeByte(b[i]))
			}
			i++
		}
	}
	for i < len(b) {
		end, err := s.json.Skip(b, i)
		if err != nil {
			return 0, nil, &exampleError{n: s.count + 1, start: i, err: err}
		}
		s.add(i, end)
		i = jsonscan.SkipSpace(b, end)
	}
	if s.count == 1 {
		return shapeOne, s.spans, nil
	}
	return shapeLines, s.spans, nil
}

// trailing checks that only white space follows the array closed before
// b[i].
func (s *splitter) trailing(b []byte, i int) error {
	if j := jsonscan.SkipSpace(b, i); j != len(b) {
		return fmt.Errorf("%d bytes follow the array (at byte %d)", len(b)-j, j)
	}
	return nil
}

func (s *splitter) splitMsgpack(b []byte) (shape, [][2]int, error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("empty body: want a msgpack map, an array of maps or maps end to end")
	}
	if j := jsonscan.SkipSpace(b, 0); j < len(b) && (b[j] == '{' || b[j] == '[') {
		// No msgpack map or array begins with '{' or '[' (positive
		// integers), nor with white space: the body is JSON sent as
		// msgpack.
		return 0, nil, fmt.Errorf("the body begins with %q, as JSON does, and no msgpack map or array does: it is read as msgpack (Content-Type: %s); send JSON with Content-Type: application/json", b[j], ContentTypeMsgpack)
	}
	i := 0
	if !msgpackscan.IsMap(b[0]) {
		n, next, st := msgpackscan.ArrayLen(b, 0)
		switch st {
		case msgpackscan.OK:
		case msgpackscan.Truncated:
			return 0, nil, fmt.Errorf("the msgpack array is truncated: its header is cut short or counts more examples than the body has bytes")
		default:
			return 0, nil, fmt.Errorf("want a msgpack map or an array of maps, got %s", msgpackscan.Kind(b[0]))
		}
		if n > len(b)-next {
			return 0, nil, fmt.Errorf("the array holds %d examples but only %d bytes follow", n, len(b)-next)
		}
		i = next
		for range n {
			end, err := s.skipMsgpack(b, i)
			if err != nil {
				return 0, nil, err
			}
			s.add(i, end)
			i = end
		}
		if i != len(b) {
			return 0, nil, fmt.Errorf("%d bytes follow the array (at byte %d)", len(b)-i, i)
		}
		return shapeArray, s.spans, nil
	}
	for i < len(b) {
		end, err := s.skipMsgpack(b, i)
		if err != nil {
			return 0, nil, err
		}
		s.add(i, end)
		i = end
	}
	if s.count == 1 {
		return shapeOne, s.spans, nil
	}
	return shapeLines, s.spans, nil
}

// skipMsgpack returns the end of the example at b[i].
func (s *splitter) skipMsgpack(b []byte, i int) (int, error) {
	n := s.count + 1
	end, st := s.msgpack.Skip(b, i)
	switch st {
	case msgpackscan.OK:
		return end, nil
	case msgpackscan.Truncated:
		return 0, &exampleError{n: n, start: i, err: errors.New("the body ends inside it")}
	case msgpackscan.TooDeep:
		return 0, &exampleError{n: n, start: i, err: fmt.Errorf("values nest deeper than %d at byte %d", maxDepth, end)}
	}
	return 0, &exampleError{n: n, start: i, err: fmt.Errorf("invalid msgpack at byte %d", end)}
}

// exampleError is an example of a body that the splitter cannot scan:
// the n-th, from 1, beginning at byte start. The splitter only says where
// the body stops making sense; the decoder, reading the example from
// start, says in which field (Server.answer).
type exampleError struct {
	n, start int
	err      error
}

func (e *exampleError) Error() string { return fmt.Sprintf("example %d: %v", e.n, e.err) }

func (e *exampleError) Unwrap() error { return e.err }
