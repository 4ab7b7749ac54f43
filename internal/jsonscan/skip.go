package jsonscan

// Skipper checks the syntax of JSON values and steps over them, bounding
// how deeply they nest. It keeps its own stack of open containers, so the
// depth it handles does not depend on the goroutine stack, and scratch
// buffers, so that it does not allocate once they have grown. It is not
// safe for concurrent use.
type Skipper struct {
	// MaxDepth bounds the arrays and objects open at once: a value that
	// opens one more is an error. Zero or less means no bound.
	MaxDepth int

	stack []byte // containers open: '{' or '['
	buf   []byte // strings unescaped, to check their escapes
}

// Skip checks the syntax of the JSON value at b[i], after optional white
// space, and returns the index after it.
func (s *Skipper) Skip(b []byte, i int) (int, *Error) {
	stack := s.stack[:0]
	defer func() { s.stack = stack[:0] }()
	var err *Error
	for {
		// A value starts at b[i], after optional space.
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, SyntaxError(b, i, "a value")
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if s.MaxDepth > 0 && len(stack) == s.MaxDepth {
				return i, errorf("values nest deeper than %d at byte %d", s.MaxDepth, i)
			}
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, err = s.key(b, i); err != nil {
					return i, err
				}
			}
			continue
		case c == '"':
			if _, i, err = String(b, i, &s.buf); err != nil {
				return i, err
			}
		case StartsNumber(c):
			// Only the syntax: the value is not wanted.
			j, ok := NumberEnd(b, i)
			if !ok {
				return j, NumberError(b, i, j)
			}
			i = j
		case c == 't':
			i, err = Literal(b, i, "true")
		case c == 'f':
			i, err = Literal(b, i, "false")
		case c == 'n':
			i, err = Literal(b, i, "null")
		default:
			return i, ValueError(b, i)
		}
		if err != nil {
			return i, err
		}
		// After a value: close containers until one has more elements.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			open := stack[len(stack)-1]
			i = SkipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i++
				if open == '{' {
					if i, err = s.key(b, SkipSpace(b, i)); err != nil {
						return i, err
					}
				}
				break
			}
			if i < len(b) && b[i] == open+2 {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			return i, SyntaxError(b, i, "',' or '"+string(open+2)+"'")
		}
	}
}

// key checks an object key and its colon at b[i] and returns the index
// after the colon.
func (s *Skipper) key(b []byte, i int) (int, *Error) {
	if i >= len(b) || b[i] != '"' {
		return i, SyntaxError(b, i, "a key")
	}
	_, i, err := String(b, i, &s.buf)
	if err != nil {
		return i, err
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, SyntaxError(b, i, "':'")
	}
	return i + 1, nil
}
