package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// apiTimeout bounds a lookup whose context has no deadline, as the
// jetstream package bounds its own API requests.
const apiTimeout = 5 * time.Second

// errNoMessageFound is the JetStream API's error code for a message get
// that finds nothing.
const errNoMessageFound = 10037

// JetStreamShards is the partitions of a stream as shards of the epoch
// protocol (docs/scale-out.md, sections 3.4 and 3.5). The stream stores
// every message on a partition subject through its subject transform,
// such as ex.* → ex.{{partition(N,1)}}.{{wildcard(1)}}, which puts a
// message published on ex.<key> on ex.<k>.<key>, k being the FNV-1a hash
// of <key> modulo N (PartitionedStreamConfig makes such a stream). Shard
// "jetstream:<stream>#<k>" is the messages whose stored subject has k in
// the partition token: those on ex.<k>.* here. Messages the stream stores
// without the transform (on subjects its source does not match) belong to
// no shard unless their subject happens to match a shard's filter. It
// implements consumer.Shards.
//
// Positions are stream sequences, as for JetStreamSource: a message's
// Resume is its own sequence and a shard's position is the last sequence
// read, so a source opened at from delivers the shard's messages with
// sequences above from, and an epoch's range (from, to] holds the shard's
// messages with from < seq ≤ to. Messages are at {Source: the shard's
// name, Offset: the sequence}, so that the worker, which keys positions by
// Position.Source, keeps each shard's under its name, and the event ids
// are jetstream:<stream>#<k>/<seq>.
//
// The partitions share the stream's sequences: a shard's are not
// consecutive, and a position need not be the sequence of one of its
// messages. A range therefore spans to − from sequences of the stream, of
// which the shard holds about 1/N: Spread says so, and the epoch protocol
// cuts ranges of N·E sequences for E messages a shard.
//
// Its methods are safe for concurrent use.
type JetStreamShards struct {
	js     jetstream.JetStream
	nc     *natsgo.Conn
	stream string
	parts  partitioning
	log    *zap.Logger

	// PartitioningCheck is how often a source Open returned checks that
	// the stream's subject transform still partitions it as it did:
	// one whose transform changed (another count, another filter) ends,
	// its Fetch returning an error that names the stream and both
	// transforms. 0: DefaultPartitioningCheck.
	PartitioningCheck time.Duration
}

var _ consumer.Shards = (*JetStreamShards)(nil)

// Spread is the number of partitions, which share the stream's sequences:
// a range of n sequences holds about n/Spread() messages of its shard.
func (s *JetStreamShards) Spread() int { return max(s.parts.n, 1) }

// NewJetStreamShards returns the shards of stream, whose subject transform
// must make partitions partitions. It fails, naming the stream, if the
// stream's name holds #, if the stream does not exist, has no subject transform, has one whose
// destination holds no partition function (or one this package cannot
// filter on), or has another number of partitions.
func NewJetStreamShards(ctx context.Context, nc *natsgo.Conn, stream string, partitions int, log *zap.Logger) (*JetStreamShards, error) {
	if partitions < 1 {
		return nil, fmt.Errorf("jetstream %s: %d partitions: there must be at least 1", stream, partitions)
	}
	if strings.Contains(stream, "#") {
		return nil, fmt.Errorf("jetstream %s: a stream whose name holds # cannot be sharded: its shard names, <stream>#<k>, would be ambiguous", stream)
	}
	if log == nil {
		log = zap.NewNop()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream %s: %w", stream, err)
	}
	s := &JetStreamShards{js: js, nc: nc, stream: stream, log: log}
	info, p, err := s.info(ctx)
	if err != nil {
		return nil, err
	}
	if p.n != partitions {
		tr := info.Config.SubjectTransform
		return nil, fmt.Errorf("jetstream %s: the stream's subject transform %s → %s makes %d partitions, not the %d configured",
			stream, tr.Source, tr.Destination, p.n, partitions)
	}
	s.parts = p
	return s, nil
}

// info returns the stream's info, fresh, and how its subject transform
// partitions it.
func (s *JetStreamShards) info(ctx context.Context) (*jetstream.StreamInfo, partitioning, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, partitioning{}, fmt.Errorf("jetstream %s: %w", s.stream, err)
	}
	info := st.CachedInfo()
	p, err := parsePartitioning(s.stream, info.Config.SubjectTransform)
	return info, p, err
}

// current returns the stream's info, fresh, once it checked that the
// stream is still partitioned as when the shards were opened.
func (s *JetStreamShards) current(ctx context.Context) (*jetstream.StreamInfo, error) {
	info, p, err := s.info(ctx)
	if err != nil {
		if info != nil {
			// The stream was read: its transform no longer partitions it.
			return nil, &repartitionedError{err}
		}
		return nil, err
	}
	if p.n != s.parts.n || p.filter(0) != s.parts.filter(0) {
		tr := info.Config.SubjectTransform
		return nil, &repartitionedError{fmt.Errorf("jetstream %s: the stream's subject transform is now %s → %s (%d partitions, the first on %s), no longer %d partitions (the first on %s): "+
			"the partition count is part of the model's history, so the stream's messages are another model's now: learn them under a new model.name with source.stream_partitions: %d, or put the transform back",
			s.stream, tr.Source, tr.Destination, p.n, p.filter(0), s.parts.n, s.parts.filter(0), p.n)}
	}
	return info, nil
}

// repartitionedError says that the stream is no longer partitioned as
// when the shards were opened, or that it was created again under a
// source reading it: it is err.
type repartitionedError struct{ err error }

func (e *repartitionedError) Error() string { return e.err.Error() }
func (e *repartitionedError) Unwrap() error { return e.err }

// DefaultPartitioningCheck is how often a source of a partition opened by
// Open checks the stream's subject transform, unless
// JetStreamShards.PartitioningCheck says otherwise.
const DefaultPartitioningCheck = 10 * time.Second

// Partitions is the number of partitions, N.
func (s *JetStreamShards) Partitions() int { return s.parts.n }

// Shard is partition k's shard, "jetstream:<stream>#<k>".
func (s *JetStreamShards) Shard(k int) shardid.ID { return shardid.JetStream(s.stream, k) }

// StaticOwnership is the ownership of a worker that is assigned stream's
// partitions ks for good: Owned lists their shards, as
// JetStreamShards.Shard makes them, and never changes.
func StaticOwnership(stream string, ks []int) consumer.Ownership {
	ids := make([]shardid.ID, len(ks))
	for i, k := range ks {
		ids[i] = shardid.JetStream(stream, k)
	}
	return consumer.Ownership{Owned: func() []shardid.ID { return ids }}
}

// Filter is the subject filter that selects partition k's messages, such
// as ex.<k>.*.
func (s *JetStreamShards) Filter(k int) string { return s.parts.filter(k) }

// Ends returns, for every partition that holds a message now, its shard
// with the sequence of its last message (one last-by-subject lookup on the
// stream's leader per partition). Every end is thus a sequence of its
// shard, so a range (from, to] cut with to = min(from + E, end) ends at a
// message of the shard, whose delivery completes it, or before one, the
// message at end, whose delivery completes it: every range can be learned
// from what the stream holds, unless the stream deletes the shard's last
// message first.
//
// A partition that holds no message (none was ever published to it, or
// the stream deleted them all) is left out: it has nothing to read, and
// the epoch protocol keeps such a shard's position as it is (an empty
// range). A shard whose last message the stream deletes while older ones
// remain reports an end below the positions read beyond it.
func (s *JetStreamShards) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	ends := make(map[shardid.ID]int64, s.parts.n)
	for k := range s.parts.n {
		seq, err := s.lastSeq(ctx, k)
		if err != nil {
			return nil, err
		}
		if seq > 0 {
			ends[s.Shard(k)] = seq
		}
	}
	return ends, nil
}

// Start resolves start on shard now, to the position before the first
// message to read: 0 for earliest; the sequence of the partition's last
// message for latest (0 if it holds none); for offset:N (N ≥ 1, the first
// sequence to read) N − 1, or the sequence of the partition's last message
// if that is lower, since no message of the shard lies between them; for
// time:T one less than the sequence of the partition's first message
// stored at or after T, or the sequence of its last message if none is.
// Every position it returns is thus at most the partition's last sequence,
// which Ends reports. It fails, naming the shard, if shard is no partition
// of the stream, if N is 0, or if N − 1 lies beyond the stream's last
// sequence.
func (s *JetStreamShards) Start(ctx context.Context, shard shardid.ID, start wire.Start) (int64, error) {
	if err := start.Validate(); err != nil {
		return 0, fmt.Errorf("jetstream: %s: %w", shard, err)
	}
	k, err := s.partition(shard)
	if err != nil {
		return 0, err
	}
	switch start.Kind {
	case wire.StartLatest:
		return s.lastSeq(ctx, k)
	case wire.StartOffset:
		if start.Offset < 1 {
			return 0, fmt.Errorf("jetstream: %s: start %s: stream sequences start at 1", shard, start)
		}
		// The stream's last sequence first: any message of the shard at
		// or below it is then stored before the shard's last is read.
		info, err := s.current(ctx)
		if err != nil {
			return 0, err
		}
		if q := int64(info.State.LastSeq); start.Offset-1 > q {
			return 0, fmt.Errorf("jetstream: %s: start %s is beyond the stream's last sequence %d", shard, start, q)
		}
		last, err := s.lastSeq(ctx, k)
		if err != nil {
			return 0, err
		}
		return min(start.Offset-1, last), nil
	case wire.StartTime:
		t := start.Time
		seq, found, err := s.msgGet(ctx, msgGetRequest{NextFor: s.parts.filter(k), StartTime: &t, NoHeaders: true})
		if err != nil {
			return 0, err
		}
		if found {
			return seq - 1, nil
		}
		return s.lastSeq(ctx, k)
	}
	return 0, nil
}

// Open returns a *JetStreamSource that reads shard's partition alone, in
// sequence order, from the sequence after from, with an ordered consumer
// filtered to the partition's subjects: Fetch delivers each of the
// shard's messages once, a cancelled Fetch loses nothing, Commit does
// nothing and Close deletes the consumer. It fails, naming the shard, if
// shard is no partition of the stream, if the stream's transform no
// longer partitions it as it did, or if from is negative or beyond the
// stream's last sequence (the stream was recreated: an error that wraps
// consumer.ErrFatal, since no retry mends it). The source's Fetch
// fails, naming the stream, once the stream's transform changes or its
// last sequence falls below the sequence read (the stream was recreated
// under it). ctx bounds only what Open itself asks the server.
func (s *JetStreamShards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	k, err := s.partition(shard)
	if err != nil {
		return nil, err
	}
	if from < 0 {
		return nil, fmt.Errorf("jetstream: %s: range start %d is negative", shard, from)
	}
	info, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	if q := int64(info.State.LastSeq); from > q {
		// No retry mends it: the stream's last sequence never goes back
		// but when the stream is created again.
		return nil, fmt.Errorf("%w: jetstream: %s: range start %d is beyond the stream's last sequence %d: was the stream recreated?", consumer.ErrFatal, shard, from, q)
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.parts.filter(k)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    uint64(from) + 1,
	}
	// A stream deleted and created again while the partition is read:
	// the ordered consumer goes on at the sequence after the last one
	// read, and would skip, without a word, every new message before it.
	// read is loaded before the stream's last sequence, which is at
	// least every sequence read before it was looked up.
	read := new(atomic.Int64)
	read.Store(from)
	check := func(ctx context.Context) error {
		seq := read.Load()
		info, err := s.current(ctx)
		if err != nil {
			return err
		}
		if last := int64(info.State.LastSeq); seq > last {
			return &repartitionedError{fmt.Errorf("jetstream %s: %s: sequence %d was read, and the stream's last sequence is now %d: was the stream recreated? Its messages are not those read before (a new model.name learns them from the start)", s.stream, shard, seq, last)}
		}
		return nil
	}
	every := s.PartitioningCheck
	if every <= 0 {
		every = DefaultPartitioningCheck
	}
	return newJetStreamSource(ctx, s.js, s.nc, s.stream, shard.String(), cfg, check, every, read, nil, s.log)
}

// CoShard is the partition of s co-partitioned with shard, a partition of
// another stream partitioned into as many ("jetstream:<stream>#<k>"): s's
// shard k, and k. It fails if shard is no such name, or if k is not one
// of s's partitions.
func (s *JetStreamShards) CoShard(shard shardid.ID) (co shardid.ID, partition int, err error) {
	k, partitioned := shard.Partition()
	if shard.Kind() != shardid.KindJetStream || !partitioned {
		return shardid.ID{}, 0, fmt.Errorf("jetstream %s: %q is no partition of a stream to join the partitions of %s to", s.stream, shard, s.stream)
	}
	if k >= s.parts.n {
		return shardid.ID{}, 0, fmt.Errorf("jetstream %s: shard %s has no co-partition: the stream has %d partitions", s.stream, shard, s.parts.n)
	}
	return s.Shard(k), k, nil
}

// OpenCoPartition opens the partition of s co-partitioned with shard
// (CoShard): from its position in positions, or from its first message
// without one. partition is its number.
func (s *JetStreamShards) OpenCoPartition(ctx context.Context, shard shardid.ID, positions map[string]int64) (_ consumer.Source, partition int, err error) {
	co, k, err := s.CoShard(shard)
	if err != nil {
		return nil, 0, err
	}
	src, err := s.Open(ctx, co, positions[co.String()]) // 0 without one: before the first sequence
	if err != nil {
		return nil, k, fmt.Errorf("partition %d of %s, co-partitioned with %s: %w", k, s.stream, shard, err)
	}
	return src, k, nil
}

// MarkSubject is a subject that the stream's subject transform stores in
// partition k: the transform's source with the first wildcard the
// partition function hashes filled with the token mark<i>, i the least
// number whose subject the transform hashes to k (the FNV-1a hash
// nats-server computes, of the tokens the function names, or of the whole
// subject), and every other wildcard with mark. A message published
// there is read by partition k's shard alone. It fails if k is no
// partition, or if the transform's source is empty.
func (s *JetStreamShards) MarkSubject(k int) (string, error) {
	p := s.parts
	if k < 0 || k >= p.n {
		return "", fmt.Errorf("jetstream %s: no partition %d (0 ≤ k < %d)", s.stream, k, p.n)
	}
	if p.source == "" {
		return "", fmt.Errorf("jetstream %s: the subject transform has no source to publish a partition's marks to", s.stream)
	}
	// Each token lands in k with a chance of 1/n: 64·n tries all miss
	// with a chance below e^-64.
	for i := range 64 * p.n {
		tok := "mark" + strconv.Itoa(i)
		var wild []string // the wildcards' tokens, by number - 1
		toks := strings.Split(p.source, ".")
		for j, t := range toks {
			switch {
			case t == ">" || (t == "*" && (len(p.hashed) == 0 || len(wild)+1 == p.hashed[0])):
				toks[j] = tok
			case t == "*":
				toks[j] = "mark"
			}
			if t == "*" {
				wild = append(wild, toks[j])
			}
		}
		subject := strings.Join(toks, ".")
		key := subject
		if len(p.hashed) > 0 {
			key = ""
			for _, w := range p.hashed {
				if w > len(wild) {
					return "", fmt.Errorf("jetstream %s: the subject transform's partition hashes wildcard %d, and its source %s has %d", s.stream, w, p.source, len(wild))
				}
				key += wild[w-1]
			}
		}
		h := fnv.New32a()
		h.Write([]byte(key)) //nolint:errcheck // a hash does not fail
		if int(h.Sum32()%uint32(p.n)) == k {
			return subject, nil
		}
	}
	return "", fmt.Errorf("jetstream %s: no token of the subject transform's source %s hashes to partition %d", s.stream, p.source, k)
}

// partition is shard's partition.
func (s *JetStreamShards) partition(shard shardid.ID) (int, error) {
	k, partitioned := shard.Partition()
	if !partitioned || shard != shardid.JetStream(s.stream, k) || k >= s.parts.n {
		return 0, fmt.Errorf("jetstream: %q is not a shard of stream %s (jetstream:%s#<k>, 0 ≤ k < %d)", shard, s.stream, s.stream, s.parts.n)
	}
	return k, nil
}

// lastSeq is the sequence of partition k's last message, 0 if it holds
// none.
func (s *JetStreamShards) lastSeq(ctx context.Context, k int) (int64, error) {
	seq, _, err := s.msgGet(ctx, msgGetRequest{LastFor: s.parts.filter(k), NoHeaders: true})
	return seq, err
}

// msgGetRequest is the JetStream API's message get request, the fields
// used here.
type msgGetRequest struct {
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
	NoHeaders bool       `json:"no_hdr,omitempty"`
}

type msgGetResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Message *struct {
		Sequence uint64 `json:"seq"`
	} `json:"message"`
}

// msgGet asks the stream's leader for the message req selects and returns
// its sequence, or found false if there is none. It goes to the leader,
// as the jetstream package's lookups do not for a stream that allows
// direct gets (any replica, perhaps behind, answers those), so that a
// shard's end never goes back.
func (s *JetStreamShards) msgGet(ctx context.Context, req msgGetRequest) (seq int64, found bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, err
	}
	msg, err := s.nc.RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET."+s.stream, body)
	if err != nil {
		return 0, false, fmt.Errorf("jetstream %s: message lookup: %w", s.stream, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, false, fmt.Errorf("jetstream %s: message lookup: %w", s.stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errNoMessageFound:
		return 0, false, nil
	case resp.Error != nil:
		return 0, false, fmt.Errorf("jetstream %s: message lookup: %s (code %d, error code %d)", s.stream, resp.Error.Description, resp.Error.Code, resp.Error.ErrCode)
	case resp.Message == nil:
		return 0, false, fmt.Errorf("jetstream %s: message lookup: an answer with neither message nor error", s.stream)
	}
	return int64(resp.Message.Sequence), true, nil
}

// partitioning is how a subject transform's destination partitions a
// stream: n partitions, and the tokens of the filter that selects one,
// whose token at index at is the partition; source is the transform's
// source, and hashed the source's wildcards (1 for the first *) whose
// tokens the partition function hashes, in order (none: the whole
// subject, {{partition(N)}}).
type partitioning struct {
	n      int
	tokens []string
	at     int
	source string
	hashed []int
}

// filter is the subject filter of partition k.
func (p partitioning) filter(k int) string {
	toks := append([]string(nil), p.tokens...)
	toks[p.at] = strconv.Itoa(k)
	return strings.Join(toks, ".")
}

// parsePartitioning reads a stream's subject transform. The destination's
// tokens are literals, kept in the filter; {{wildcard(i)}}, $i and the
// other functions that make one token, which become *; a final >; and
// exactly one {{partition(N, ...)}}, which makes N partitions. A function
// that may make several tokens (split, splitFromLeft, ...) can follow the
// partition token, and makes the rest of the filter >.
func parsePartitioning(stream string, tr *jetstream.SubjectTransformConfig) (partitioning, error) {
	if tr == nil || tr.Destination == "" {
		return partitioning{}, fmt.Errorf("jetstream %s: the stream has no subject transform, so it has no partitions (a partitioned stream has one such as ex.* → ex.{{partition(N,1)}}.{{wildcard(1)}})", stream)
	}
	bad := func(why string) (partitioning, error) {
		return partitioning{}, fmt.Errorf("jetstream %s: subject transform %s → %s: %s", stream, tr.Source, tr.Destination, why)
	}
	p := partitioning{at: -1, source: tr.Source}
	for _, tok := range destinationTokens(tr.Destination) {
		name, args, isFunc := mappingFunction(tok)
		switch {
		case len(tok) > 1 && tok[0] == '$':
			if _, err := strconv.Atoi(tok[1:]); err != nil {
				p.tokens = append(p.tokens, tok)
			} else {
				p.tokens = append(p.tokens, "*")
			}
		case !isFunc:
			p.tokens = append(p.tokens, tok)
		case name == "partition":
			if p.at >= 0 {
				return bad("two partition functions")
			}
			n, err := strconv.Atoi(strings.TrimSpace(args[0]))
			if err != nil || n < 1 {
				return bad(fmt.Sprintf("the partition count %q is no number of partitions", args[0]))
			}
			for _, a := range args[1:] {
				w, err := strconv.Atoi(strings.TrimSpace(a))
				if err != nil || w < 1 {
					return bad(fmt.Sprintf("the partition's wildcard %q is no wildcard's number", a))
				}
				p.hashed = append(p.hashed, w)
			}
			p.n, p.at = n, len(p.tokens)
			p.tokens = append(p.tokens, "")
		case name == "wildcard" || name == "left" || name == "right" || name == "random":
			p.tokens = append(p.tokens, "*")
		case strings.HasPrefix(name, "split") || strings.HasPrefix(name, "slice"):
			if p.at < 0 {
				return bad(fmt.Sprintf("%s comes before the partition token and may make any number of tokens, so no filter selects a partition", tok))
			}
			p.tokens = append(p.tokens, ">")
			return p, nil
		default:
			return bad(fmt.Sprintf("unknown mapping function %s", tok))
		}
	}
	if p.at < 0 {
		return bad("no {{partition(N, ...)}} token, so the stream has no partitions")
	}
	return p, nil
}

// destinationTokens splits a transform destination at the dots outside
// {{ }}.
func destinationTokens(dest string) []string {
	var toks []string
	depth, begin := 0, 0
	for i := 0; i < len(dest); i++ {
		switch {
		case strings.HasPrefix(dest[i:], "{{"):
			depth++
			i++
		case strings.HasPrefix(dest[i:], "}}") && depth > 0:
			depth--
			i++
		case dest[i] == '.' && depth == 0:
			toks = append(toks, dest[begin:i])
			begin = i + 1
		}
	}
	return append(toks, dest[begin:])
}

// mappingFunction reads a token that is one mapping function,
// {{name(args)}}, as nats-server does: the name in lower case, and the
// arguments.
func mappingFunction(tok string) (name string, args []string, ok bool) {
	if len(tok) <= 4 || !strings.HasPrefix(tok, "{{") || !strings.HasSuffix(tok, "}}") {
		return "", nil, false
	}
	inner := tok[2 : len(tok)-2]
	open := strings.IndexByte(inner, '(')
	end := strings.LastIndexByte(inner, ')')
	if open < 0 || end < open || strings.TrimSpace(inner[end+1:]) != "" {
		return "", nil, false
	}
	name = strings.ToLower(strings.TrimSpace(inner[:open]))
	return name, strings.Split(inner[open+1:end], ","), true
}

// PartitionedStreamConfig is the configuration of a stream named name
// that stores the messages published on subject in partitions
// partitions (at least 1), as JetStreamShards reads them: subject, such
// as ex.*, is the stream's subject and its transform's source, and the
// destination puts the partition token before the first wildcard and
// hashes the tokens that the * wildcards match: ex.* becomes
// ex.{{partition(N,1)}}.{{wildcard(1)}}, and a.*.b.* becomes
// a.{{partition(N,1,2)}}.{{wildcard(1)}}.b.{{wildcard(2)}}. A subject whose
// only wildcard is a final > is partitioned by the hash of the whole
// subject (ex.> becomes ex.{{partition(N)}}.>), and a subject without
// wildcards is a prefix: ex stands for ex.*. The caller sets the rest
// (storage, retention, replicas).
func PartitionedStreamConfig(name, subject string, partitions int) jetstream.StreamConfig {
	toks := strings.Split(subject, ".")
	if !strings.ContainsAny(subject, "*>") {
		toks = append(toks, "*")
		subject += ".*"
	}
	var wild []string
	for i, t := range toks {
		if t == "*" {
			wild = append(wild, strconv.Itoa(len(wild)+1))
			toks[i] = "{{wildcard(" + wild[len(wild)-1] + ")}}"
		}
	}
	part := "{{partition(" + strings.Join(append([]string{strconv.Itoa(partitions)}, wild...), ",") + ")}}"
	dest := make([]string, 0, len(toks)+1)
	placed := false
	for _, t := range toks {
		if !placed && (strings.HasPrefix(t, "{{") || t == ">") {
			dest, placed = append(dest, part), true
		}
		dest = append(dest, t)
	}
	return jetstream.StreamConfig{
		Name:             name,
		Subjects:         []string{subject},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: subject, Destination: strings.Join(dest, ".")},
	}
}
