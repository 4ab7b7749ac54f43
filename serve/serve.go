// Package serve answers prediction requests from the model a worker holds
// while it learns: over HTTP (POST /v1/predict) and as a NATS micro
// service. It reads the newest read-only view of the model the worker
// published (see consumer.Worker.View), so answering never takes a lock
// that learning takes, and a request never changes the model, its
// positions or its metrics. A request may instead name a stored
// generation of the model; the few asked for last stay loaded, and at
// most Options.Generations are loaded or being loaded at once.
//
// A request holds one example, a JSON array of them, or JSON lines (msgpack
// likewise: a map, an array of maps, or maps end to end), in the example
// format the worker learns from; the reply holds, in the same shape and
// order, for each example the fields of a prediction event that make
// sense without a source position (see wire.Reply).
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Options configure a Server. A field that is zero takes its default.
type Options struct {
	// Model is the model's name, in every reply.
	Model string
	// MaxBytes bounds a request's body (DefaultMaxBytes).
	MaxBytes int
	// MaxExamples bounds the examples of a request (DefaultMaxExamples),
	// and with them its reply: a small body can hold many examples, and
	// each reply (the model's name and version, the prediction) is larger
	// than an empty example.
	MaxExamples int
	// MaxInFlight bounds the requests answered at once, over every
	// interface (DefaultMaxInFlight).
	MaxInFlight int
	// Timeout bounds reading a request's body and then, once it is read,
	// answering it, each (DefaultTimeout). Loading a stored generation is
	// bounded by it too.
	Timeout time.Duration
	// Generations is how many stored generations may be loaded or being
	// loaded at once (DefaultGenerations): the memory they take is
	// bounded by it, whatever the requests.
	Generations int
	// Decoder bounds each example as the worker's decoder does.
	Decoder wire.DecoderOptions
}

// The defaults of Options.
const (
	DefaultMaxBytes    = 1 << 20
	DefaultMaxExamples = 10000
	DefaultMaxInFlight = 64
	DefaultTimeout     = 5 * time.Second
	DefaultGenerations = 4
)

// Live is where the newest view of the learning model is read:
// *consumer.Worker is one. View returns nil until a model is loaded.
type Live interface {
	View() *learner.View
}

// LoadGeneration reads the state of a stored generation of the model. An
// error wrapping ErrNotFound says there is no such generation. ctx is
// cancelled when no request waits for the load any more, or after
// Options.Timeout: the load should then return soon, as it keeps one of
// the Options.Generations places until it does.
type LoadGeneration func(ctx context.Context, gen uint64) (*learner.State, error)

// ErrNotFound marks a generation that is not stored.
var ErrNotFound = errors.New("no such generation")

// Server answers prediction requests. Its methods are safe for concurrent
// use.
type Server struct {
	opts Options
	// checkShard refuses a request's shard ("" for none) that cannot name
	// a model of this server, live or stored; live is the newest view of
	// the model of a shard checkShard let through; gens holds the stored
	// generations requests name, nil without a store.
	checkShard func(shard string) error
	live       func(shard string) (*learner.View, error)
	gens       *generations
	metrics    *Metrics
	// inFlight holds a token for each request being answered, from when
	// its body has been read.
	inFlight chan struct{}
	// reading holds a token for each HTTP request whose body is being
	// received: bodiesPerToken for each in-flight token, so that the
	// memory of bodies in transit is bounded (serve.max_bytes each) while
	// clients slow to send theirs still leave room for the others.
	reading chan struct{}
	// liveDecoders decode for the live model, whose configuration never
	// changes while the worker runs.
	liveDecoders *decoders
	states       sync.Pool // *state
}

// New returns a server of the model cfg describes, whose newest view live
// publishes. load reads stored generations; nil means there are none.
// A request that names a shard is refused with 400, whether it asks for
// the live model or a stored generation. metrics may be nil.
func New(opts Options, cfg learner.Config, live Live, load LoadGeneration, metrics *Metrics) *Server {
	s := newServer(opts, cfg, metrics)
	s.checkShard = func(shard string) error {
		if shard != "" {
			return errorf(StatusBadRequest, "shard: this worker learns one model, over every partition: leave shard out")
		}
		return nil
	}
	s.live = func(string) (*learner.View, error) {
		if v := live.View(); v != nil {
			return v, nil
		}
		return nil, errorf(StatusUnavailable, "the model is not loaded yet: try again")
	}
	if load != nil {
		s.loadFrom(func(ctx context.Context, _ string, gen uint64) (*learner.State, error) { return load(ctx, gen) })
	}
	return s
}

// ShardViews is where the newest view of each shard's model is read in
// partition scope: *consumer.Partitions is one. View returns nil for a
// shard this worker does not learn.
type ShardViews interface {
	View(shard shardid.ID) *learner.View
	// Learns reports whether this worker learns shard, or may once its
	// partitions are assigned: a shard it learns whose View is nil is
	// not loaded yet (503), one it does not is another replica's (404).
	Learns(shard shardid.ID) bool
}

// LoadShardGeneration reads the state of a stored generation of a
// shard's model; an error wrapping ErrNotFound says there is none. ctx
// is as LoadGeneration's.
type LoadShardGeneration func(ctx context.Context, shard shardid.ID, gen uint64) (*learner.State, error)

// loadNamed reads a stored generation of the model of the shard a
// request names ("" for none).
type loadNamed func(ctx context.Context, shard string, gen uint64) (*learner.State, error)

// NewSharded returns a server of partition scope: one model per shard,
// each of configuration cfg, the newest views of the shards this worker
// learns in views. A request names its shard (?shard= or the header
// Hyperplane-Shard, such as kafka:clicks/3), read by shardid.Parse; one
// that names none is refused with 400, whether it asks for the live
// model or a stored generation; one for a shard this worker does not
// learn, or a name no shard has, gets 404, as the shard is another
// replica's. load reads stored generations of a shard, whichever replica
// learns it; nil means there are none.
func NewSharded(opts Options, cfg learner.Config, views ShardViews, load LoadShardGeneration, metrics *Metrics) *Server {
	s := newServer(opts, cfg, metrics)
	s.checkShard = func(shard string) error {
		if shard == "" {
			return errorf(StatusBadRequest, "shard: the model is learned per partition (model.scope: partition): name the partition with ?shard=, such as kafka:<topic>/<partition>")
		}
		return nil
	}
	s.live = func(shard string) (*learner.View, error) {
		if id, err := shardid.Parse(shard); err == nil {
			if v := views.View(id); v != nil {
				return v, nil
			}
			if views.Learns(id) {
				return nil, errorf(StatusUnavailable, "shard %s: its model is not loaded yet: try again", shard)
			}
		}
		return nil, errorf(StatusNotFound, "shard %s: this worker does not learn it (another replica does, or it is no partition of the source)", shard)
	}
	if load != nil {
		s.loadFrom(func(ctx context.Context, shard string, gen uint64) (*learner.State, error) {
			id, err := shardid.Parse(shard)
			if err != nil {
				return nil, errorf(StatusNotFound, "generation %d: %v", gen, err)
			}
			return load(ctx, id, gen)
		})
	}
	return s
}

// loadFrom has s answer from the stored generations load reads.
func (s *Server) loadFrom(load loadNamed) {
	s.gens = &generations{load: load, room: s.opts.Generations, timeout: s.opts.Timeout, decoder: s.opts.Decoder}
}

func newServer(opts Options, cfg learner.Config, metrics *Metrics) *Server {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Decoder.MaxBytes <= 0 {
		opts.Decoder.MaxBytes = wire.DefaultMaxBytes
	}
	if opts.MaxExamples <= 0 {
		opts.MaxExamples = DefaultMaxExamples
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Generations <= 0 {
		opts.Generations = DefaultGenerations
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	s := &Server{
		opts:         opts,
		metrics:      metrics,
		inFlight:     make(chan struct{}, opts.MaxInFlight),
		reading:      make(chan struct{}, bodiesPerToken*opts.MaxInFlight),
		liveDecoders: newDecoders(cfg, opts.Decoder),
	}
	s.states.New = func() any { return new(state) }
	return s
}

// Error is a request the server did not answer: Status is the HTTP status
// that says why (the NATS error code is the same number), Message the
// reason, with the example and field when the input is at fault.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// The statuses of Error.
const (
	StatusBadRequest  = 400
	StatusNotFound    = 404
	StatusTimeout     = 408
	StatusTooLarge    = 413
	StatusUnavailable = 503
)

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// outcome names a request's result in the metrics.
func outcome(err error) string {
	var e *Error
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) {
		// The client left: no fault of the server's.
		return "cancelled"
	}
	if !errors.As(err, &e) {
		return "error"
	}
	switch e.Status {
	case StatusBadRequest:
		return "bad_request"
	case StatusNotFound:
		return "not_found"
	case StatusTimeout:
		return "timeout"
	case StatusTooLarge:
		return "too_large"
	case StatusUnavailable:
		return "unavailable"
	}
	return "error"
}

// acquire takes an in-flight token, or refuses the request when there are
// none left: waiting would only make the queue longer than the clients'
// timeouts.
func (s *Server) acquire() error {
	select {
	case s.inFlight <- struct{}{}:
		return nil
	default:
		return errorf(StatusUnavailable, "%d requests are being answered, the most serve.max_in_flight allows: try again", s.opts.MaxInFlight)
	}
}

func (s *Server) release() { <-s.inFlight }

// bodiesPerToken is how many request bodies may be received at once for
// each in-flight token.
const bodiesPerToken = 4

// startReading takes a token to receive a request's body, or refuses the
// request when bodiesPerToken × serve.max_in_flight bodies are being
// received already.
func (s *Server) startReading() error {
	select {
	case s.reading <- struct{}{}:
		return nil
	default:
		return errorf(StatusUnavailable, "%d request bodies are being received, %d for each of serve.max_in_flight's requests: try again", cap(s.reading), bodiesPerToken)
	}
}

func (s *Server) doneReading() { <-s.reading }

// request is one request as both interfaces give it.
type request struct {
	body    []byte
	msgpack bool
	// generation is the stored generation to answer from, "" for the
	// live model; shard names the shard's model in partition scope.
	generation string
	shard      string
	// maxReply, if not 0, bounds the reply's bytes: a NATS reply over the
	// server's max_payload would never reach the requester.
	maxReply int
}

// answer is the reply to a request: its bytes, the shape of the body,
// and the model version that answered.
type answer struct {
	body    []byte
	shape   shape
	version uint64
}

// state is one request's working memory, pooled.
type state struct {
	body    []byte
	split   splitter
	x       learner.Example
	scratch learner.Scratch
	out     []byte
}

// answer predicts every example of req with the view it names and encodes
// the replies into st.out. The model is only read.
func (s *Server) answer(ctx context.Context, req request, st *state) (answer, error) {
	if len(req.body) > s.opts.MaxBytes {
		return answer{}, errorf(StatusTooLarge, "the body's %d bytes exceed serve.max_bytes, %d", len(req.body), s.opts.MaxBytes)
	}
	view, decs, done, err := s.view(ctx, req.shard, req.generation)
	if err != nil {
		return answer{}, err
	}
	defer done()
	dec := decs.get()
	defer decs.put(dec)
	st.split.max = s.opts.MaxExamples
	shp, spans, err := st.split.split(req.body, req.msgpack)
	if err != nil {
		// Declared here, where it is needed: errors.As moves it to the
		// heap, which an answer without an error does not pay for.
		var tooMany *tooManyError
		if errors.As(err, &tooMany) {
			return answer{}, errorf(StatusTooLarge, "%v", err)
		}
		return answer{}, errorf(StatusBadRequest, "%v", st.named(dec, s.opts.Decoder.MaxBytes, req, err))
	}
	labels := view.Labels()
	out := st.out[:0]
	if shp == shapeArray {
		if req.msgpack {
			out = wire.AppendMsgpackArrayHeader(out, len(spans))
		} else {
			out = append(out, '[')
		}
	}
	r := wire.Reply{Model: s.opts.Model, Version: view.Version()}
	for n, sp := range spans {
		raw := req.body[sp[0]:sp[1]]
		var err error
		if req.msgpack {
			_, r.Meta, err = dec.DecodeMsgpack(raw, &st.x)
		} else {
			r.Meta, err = dec.DecodeJSON(raw, &st.x)
		}
		if err != nil {
			if shp == shapeOne {
				return answer{}, errorf(StatusBadRequest, "%v", err)
			}
			return answer{}, errorf(StatusBadRequest, "example %d: %v", n+1, err)
		}
		r.Prediction = view.Predict(&st.x, &st.scratch)
		if req.msgpack {
			out = r.AppendMsgpack(out, labels)
			continue
		}
		if shp == shapeArray && n > 0 {
			out = append(out, ',')
		}
		out = r.AppendJSON(out, labels)
		if shp != shapeArray {
			out = append(out, '\n')
		}
	}
	if shp == shapeArray && !req.msgpack {
		out = append(out, "]\n"...)
	}
	st.out = out
	if req.maxReply > 0 && len(out) > req.maxReply {
		return answer{}, errorf(StatusTooLarge, "the reply's %d bytes exceed the %d a NATS message takes here (the server's max_payload, less the reply's headers): send fewer examples a request", len(out), req.maxReply)
	}
	return answer{body: out, shape: shp, version: view.Version()}, nil
}

// named is err, a body that does not split, with the field at fault
// when err is an example the splitter cannot scan and the decoder, reading
// that example from where it begins, names a field: the splitter only
// says where the body stops making sense, as a worker's dead letter names
// the field. maxBytes is the most bytes the decoder takes for an example.
func (st *state) named(dec *wire.Decoder, maxBytes int, req request, err error) error {
	var ee *exampleError
	if !errors.As(err, &ee) {
		return err
	}
	rest := req.body[ee.start:]
	var derr error
	if req.msgpack {
		_, _, derr = dec.DecodeMsgpack(rest, &st.x)
	} else {
		// rest runs to the end of the body, over the examples after
		// this one: only as many bytes as one example may have are
		// read, lest their size be taken for its. An example the cut
		// ends inside is over that size, and the splitter says where.
		cut := len(rest) > maxBytes
		if cut {
			rest = rest[:maxBytes]
		}
		_, derr = dec.DecodeJSON(rest, &st.x)
		if cut && errors.Is(derr, io.ErrUnexpectedEOF) {
			return err
		}
	}
	var de *wire.DecodeError
	if !errors.As(derr, &de) || de.Field == "example" {
		return err
	}
	return fmt.Errorf("example %d: %w", ee.n, derr)
}

// view returns the view a request names, with its decoders, and done,
// to call once the view is no longer read: a stored generation is held
// until then.
func (s *Server) view(ctx context.Context, shard, generation string) (view *learner.View, decs *decoders, done func(), err error) {
	if err := s.checkShard(shard); err != nil {
		return nil, nil, nil, err
	}
	if generation == "" {
		v, err := s.live(shard)
		if err != nil {
			return nil, nil, nil, err
		}
		return v, s.liveDecoders, func() {}, nil
	}
	gen, err := strconv.ParseUint(generation, 10, 64)
	if err != nil || gen == 0 {
		return nil, nil, nil, errorf(StatusBadRequest, "generation: %q is not a generation number (1 or more)", generation)
	}
	if s.gens == nil {
		return nil, nil, nil, errorf(StatusNotFound, "generation %d: this worker has no snapshot store (snapshot.url)", gen)
	}
	g, err := s.gens.get(ctx, shard, gen)
	if err != nil {
		return nil, nil, nil, err
	}
	return g.view, g.decoders, func() { s.gens.put(g) }, nil
}

// decoders pools the example decoders of one model configuration: a
// Decoder is not safe for concurrent use.
type decoders struct{ pool sync.Pool }

func newDecoders(cfg learner.Config, opts wire.DecoderOptions) *decoders {
	d := &decoders{}
	d.pool.New = func() any { return wire.NewDecoder(cfg, opts) }
	return d
}

func (d *decoders) get() *wire.Decoder  { return d.pool.Get().(*wire.Decoder) }
func (d *decoders) put(x *wire.Decoder) { d.pool.Put(x) }

// handle answers a request and records it in the metrics under iface.
// read gets the request, with a deadline of the timeout, and may read the
// body into buf, the pooled buffer it gets; an interface that receives the
// body then (HTTP) holds one of the tokens that bound the bodies being
// received while it does (startReading), one whose body has arrived
// already (NATS) none. Only then does the request take an in-flight
// token, so that clients slow to send their bodies do not keep others
// from being answered; answering it has the timeout again. reply
// receives the answer while the request's memory is still held, and must
// not keep it; an error it returns says the answer did not reach the
// client, and is the request's outcome in the metrics.
func (s *Server) handle(ctx context.Context, iface string, read func(ctx context.Context, buf []byte) (request, []byte, error), reply func(answer, error) error) {
	start := time.Now()
	var err error
	defer func() {
		s.metrics.Requests.WithLabelValues(iface, outcome(err)).Inc()
		s.metrics.Latency.WithLabelValues(iface).Observe(time.Since(start).Seconds())
	}()
	st := s.states.Get().(*state)
	defer s.putState(st)
	readCtx, cancelRead := context.WithTimeout(ctx, s.opts.Timeout)
	var req request
	req, st.body, err = read(readCtx, st.body[:0])
	cancelRead()
	if err != nil {
		reply(answer{}, err)
		return
	}
	if err = s.acquire(); err != nil {
		reply(answer{}, err)
		return
	}
	defer s.release()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var a answer
	a, err = s.answer(ctx, req, st)
	if rerr := reply(a, err); err == nil {
		err = rerr
	}
}

// maxPooledReply bounds the reply buffer a pooled state keeps: one large
// request should not pin its memory for ever.
const maxPooledReply = 1 << 20

func (s *Server) putState(st *state) {
	if cap(st.out) > maxPooledReply {
		st.out = nil
	}
	if cap(st.body) > maxPooledReply {
		st.body = nil
	}
	s.states.Put(st)
}
