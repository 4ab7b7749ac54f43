package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// PredictPath is where the HTTP interface answers: POST only.
const PredictPath = "/v1/predict"

// GenerationHeader names a stored generation to answer from, as the query
// parameter "generation" does; the reply carries it back.
const GenerationHeader = "Hyperplane-Generation"

// ShardHeader names the shard whose model answers in partition scope, as
// the query parameter "shard" does.
const ShardHeader = "Hyperplane-Shard"

// VersionHeader carries the version of the model that answered.
const VersionHeader = "Hyperplane-Model-Version"

// retryAfter is the Retry-After of a request refused for load, in seconds.
const retryAfter = "1"

// ContentTypeMsgpack is the content type of msgpack bodies; any other is
// read as JSON.
const ContentTypeMsgpack = "application/msgpack"

// isMsgpack reports whether a Content-Type names msgpack. Only the media
// type counts, in any case: parameters that do not parse (a name without
// a value, one given twice) leave it what it is, where the body would
// otherwise be read as JSON and refused with a reply asking for the
// content type it had.
func isMsgpack(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == ContentTypeMsgpack || mt == "application/x-msgpack" || mt == "application/vnd.msgpack"
}

// Register adds the HTTP interface to mux: POST /v1/predict.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+PredictPath, s.ServeHTTP)
}

// ServeHTTP answers a prediction request: the body holds the examples
// (Content-Type application/msgpack for msgpack, JSON otherwise), the
// query parameter generation or the header Hyperplane-Generation names a
// stored generation instead of the live model. The reply has the body's
// format and shape, and the version that answered in the header
// Hyperplane-Model-Version. Errors are text: 400 for bad input, with the
// example and field; 404 for a generation not stored; 408 when the body
// did not arrive within the timeout, or the generation did not load
// within it; 413 for a body over the limit; 500 for a generation the
// store failed to give or that is damaged; 503, with Retry-After, when
// too many requests are in flight or too many bodies are being received,
// when every place for a stored generation is taken by one in use, or
// when no model is loaded yet. The request counts as in flight only once
// its body has been read.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	msgpack := isMsgpack(r.Header.Get("Content-Type"))
	query, queryErr := readQuery(r.URL.RawQuery)
	generation, genErr := namedOnce(query, "generation", r.Header, GenerationHeader)
	shard, shardErr := namedOnce(query, "shard", r.Header, ShardHeader)
	if queryErr == nil {
		queryErr = cmp.Or(genErr, shardErr)
	}
	rc := http.NewResponseController(rw)
	// bodyRead says the body was read to its end. A request refused
	// before that closes its connection: net/http would otherwise read
	// what is left of the body before it replies, with no deadline, so
	// that a client slow to send it would hold the connection and never
	// hear why it was refused.
	bodyRead := false
	read := func(ctx context.Context, buf []byte) (request, []byte, error) {
		req := request{msgpack: msgpack, generation: generation, shard: shard}
		if queryErr != nil {
			return req, buf, queryErr
		}
		if r.ContentLength > int64(s.opts.MaxBytes) {
			return req, buf, errorf(StatusTooLarge, "the body's %d bytes exceed serve.max_bytes, %d", r.ContentLength, s.opts.MaxBytes)
		}
		if err := s.startReading(); err != nil {
			return req, buf, err
		}
		defer s.doneReading()
		deadline, _ := ctx.Deadline()
		rc.SetReadDeadline(deadline)          //nolint:errcheck // a server without deadlines is bounded by ctx alone
		defer rc.SetReadDeadline(time.Time{}) //nolint:errcheck // as above
		body, err := readBody(r.Body, buf, s.opts.MaxBytes)
		req.body = body
		switch {
		case errors.Is(err, errTooLarge):
			return req, body, errorf(StatusTooLarge, "the body exceeds serve.max_bytes, %d", s.opts.MaxBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return req, body, errorf(StatusTimeout, "the body did not arrive within serve.timeout, %s", s.opts.Timeout)
		case err != nil:
			return req, body, errorf(StatusBadRequest, "reading the body: %v", err)
		}
		bodyRead = true
		return req, body, nil
	}
	s.handle(r.Context(), "http", read, func(a answer, err error) error {
		// Writing the reply gets a timeout of its own: the request's may
		// have passed already, as when it is refused with 408 for it.
		rc.SetWriteDeadline(time.Now().Add(s.opts.Timeout)) //nolint:errcheck // as above
		if err != nil {
			if !bodyRead {
				rw.Header().Set("Connection", "close")
			}
			writeError(rw, err)
			return nil
		}
		h := rw.Header()
		switch {
		case msgpack:
			h.Set("Content-Type", ContentTypeMsgpack)
		case a.shape == shapeLines:
			h.Set("Content-Type", "application/x-ndjson")
		default:
			h.Set("Content-Type", "application/json")
		}
		h.Set(VersionHeader, strconv.FormatUint(a.version, 10))
		if generation != "" {
			h.Set(GenerationHeader, generation)
		}
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
		// A reply larger than the connection's buffer is written here,
		// and an error says the client did not take it: it is no
		// answer, and is not counted as one.
		switch _, werr := rw.Write(a.body); {
		case werr == nil:
			return nil
		case errors.Is(werr, os.ErrDeadlineExceeded):
			return errorf(StatusTimeout, "the reply was not read within serve.timeout, %s", s.opts.Timeout)
		default:
			return fmt.Errorf("writing the reply: %w (%w)", context.Canceled, werr)
		}
	})
}

// readQuery reads a request's query string. One that does not parse
// whole, or names generation or shard more than once, is refused: what
// was dropped or left out could have named the model to answer from, and
// another model would answer in its place.
func readQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errorf(StatusBadRequest, "the query string: %v", err)
	}
	for _, key := range []string{"generation", "shard"} {
		if len(q[key]) > 1 {
			return nil, errorf(StatusBadRequest, "%s: given %d times in the query string, want once", key, len(q[key]))
		}
	}
	return q, nil
}

// namedOnce is the value the query parameter key names or else, if it
// names none, the header: "" for neither. A header given more than once
// with different values is refused, as readQuery refuses a parameter
// given twice: answering from one would have another model answer than
// the one the other names.
func namedOnce(q url.Values, key string, h http.Header, header string) (string, error) {
	v, err := oneValue(key, header, h.Values(header))
	if err != nil {
		return "", err
	}
	if qv := q.Get(key); qv != "" {
		if v != "" && v != qv {
			return "", errorf(StatusBadRequest, "%s: the query names %q and the header %s %q, want one", key, qv, header, v)
		}
		return qv, nil
	}
	return v, nil
}

// oneValue is the value the header named header gives key among vals,
// its values in the order they came: "" for none. Values that differ are
// refused with 400 naming both.
func oneValue(key, header string, vals []string) (string, error) {
	var v string
	for _, x := range vals {
		switch {
		case x == "" || x == v:
		case v == "":
			v = x
		default:
			return "", errorf(StatusBadRequest, "%s: the header %s names both %q and %q, want one", key, header, v, x)
		}
	}
	return v, nil
}

// writeError writes err as a text reply with its status.
func writeError(rw http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var e *Error
	if errors.As(err, &e) {
		status = e.Status
	}
	if status == StatusUnavailable {
		rw.Header().Set("Retry-After", retryAfter)
	}
	if status == StatusTooLarge || status == StatusTimeout {
		// The rest of the body is not read: the connection cannot carry
		// another request.
		rw.Header().Set("Connection", "close")
	}
	http.Error(rw, err.Error(), status)
}

var errTooLarge = errors.New("body too large")

// readBody reads r into buf, appending, up to max bytes: more is
// errTooLarge.
func readBody(r io.Reader, buf []byte, max int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(cap(buf), max+1)
		n, err := r.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
