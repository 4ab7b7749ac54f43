package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	subj "github.com/hyperplane-ml/hyperplane/internal/subject"
)

// State is what ProvisionStreams found or did about a stream.
type State string

const (
	// Created: the stream was missing and is made.
	Created State = "created"
	// Exists: a stream that fits was there already; it is left as it is.
	Exists State = "exists"
	// Failed: the stream could not be made, or the one there does not fit.
	Failed State = "failed"
)

// StreamOptions say how ProvisionStreams makes a stream that is missing.
// A stream that exists is never changed, whatever they say.
type StreamOptions struct {
	// Retention is a new stream's MaxAge; 0 is no age limit.
	Retention time.Duration
	// DuplicateWindow is how long a new stream remembers a Nats-Msg-Id,
	// so how late a republished message is still dropped; 0 is the
	// server's default, 2m or the retention if shorter.
	DuplicateWindow time.Duration
	// Replicas of a new stream; 0 is 1.
	Replicas int
}

// StreamTarget is a stream that ProvisionStreams makes sure of.
type StreamTarget struct {
	// Stream names a stream that is read: it must store Subject (if that
	// is not empty), and it is created storing Subject if it is missing.
	// Empty, Subject is one that is published to: it must be stored by
	// some stream, and a new one named StreamName(Subject) is created if
	// none does.
	Stream string
	// Subject is the subjects a read stream stores, or the subject
	// published to.
	Subject string
	// Partitions, if above 0, makes a missing read stream partitioned by
	// its subject transform (PartitionedStreamConfig), and a stream there
	// without a transform unfit (ErrNotPartitioned). It needs nats-server
	// PartitionedStreamServer or later: see CheckPartitionedStreams.
	Partitions int
}

// StreamResult is what ProvisionStreams found or did about a target.
type StreamResult struct {
	// Stream is the stream's name; empty when the stream that stores a
	// published subject could not be looked up.
	Stream string
	State  State
	// Info is the stream as it is, when it exists: Created, Exists, and
	// the failures about a stream that exists but does not fit
	// (ErrSubjectNotStored, ErrNotPartitioned, ErrReadBack).
	Info *jetstream.StreamInfo
	// Err says why the State is Failed: one of the errors below, or what
	// the server said. It reads as a report on the stream named.
	Err error
}

// The reasons a stream that exists does not fit, or one that is missing
// cannot be made.
var (
	// ErrSubjectNotStored: the read stream exists but its subjects do not
	// include the target's Subject.
	ErrSubjectNotStored = errors.New("exists, but does not store the subject")
	// ErrNotPartitioned: the read stream exists without a subject
	// transform, so without partitions, but the target has Partitions.
	ErrNotPartitioned = errors.New("exists, but has no subject transform, so no partitions")
	// ErrNoSubject: the read stream does not exist, and the target has no
	// Subject for it to store.
	ErrNoSubject = errors.New("does not exist, and no subject is given for it to store")
	// ErrReadBack: the subject published to is stored in the stream that
	// is read, so the worker would read its own events.
	ErrReadBack = errors.New("exists and stores the subject, but it is the stream read: the worker would read its own events")
)

// ProvisionStreams makes sure each target has its stream, creating the
// missing ones with the options o (file storage), and returns one result
// for each target, in order. It never changes a stream that exists. read is
// the stream the worker reads its examples from (its Stream empty when it
// reads none): a published subject that read stores, within read's Subject
// (all of them if that is empty), fails with ErrReadBack. The error is for
// a server that could not be asked at all: JetStream unreachable or not
// enabled (errors.Is jetstream.ErrJetStreamNotEnabled or
// ErrJetStreamNotEnabledForAccount).
func ProvisionStreams(ctx context.Context, nc *natsgo.Conn, targets []StreamTarget, read StreamTarget, o StreamOptions) ([]StreamResult, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		return nil, err
	}
	results := make([]StreamResult, len(targets))
	for i, t := range targets {
		if t.Stream != "" {
			results[i] = provisionRead(ctx, js, t, o)
		} else {
			results[i] = provisionPublished(ctx, js, t.Subject, read, o)
		}
	}
	return results, nil
}

// provisionRead creates the stream t.Stream storing t.Subject, or checks
// that the stream there stores t.Subject and is partitioned if t says so.
func provisionRead(ctx context.Context, js jetstream.JetStream, t StreamTarget, o StreamOptions) StreamResult {
	r := StreamResult{Stream: t.Stream}
	s, err := js.Stream(ctx, t.Stream)
	switch {
	case err == nil:
		r.Info = s.CachedInfo()
		subjects := r.Info.Config.Subjects
		if t.Subject != "" && len(subjects) > 0 && !slices.ContainsFunc(subjects, func(s string) bool { return subj.Within(t.Subject, s) }) {
			r.State, r.Err = Failed, ErrSubjectNotStored
			return r
		}
		if t.Partitions > 0 && r.Info.Config.SubjectTransform == nil {
			r.State, r.Err = Failed, ErrNotPartitioned
			return r
		}
		r.State = Exists
		return r
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		r.State, r.Err = Failed, err
		return r
	case t.Subject == "":
		r.State, r.Err = Failed, ErrNoSubject
		return r
	}
	sc := jetstream.StreamConfig{Name: t.Stream, Subjects: []string{t.Subject}}
	if t.Partitions > 0 {
		sc = PartitionedStreamConfig(t.Stream, t.Subject, t.Partitions)
	}
	return createStream(ctx, js, sc, t.Subject, o)
}

// provisionPublished makes sure a stream stores the published subject:
// one that does already, or a new one named after the subject.
func provisionPublished(ctx context.Context, js jetstream.JetStream, subject string, read StreamTarget, o StreamOptions) StreamResult {
	name, err := js.StreamNameBySubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		name = StreamName(subject)
		return createStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}, subject, o)
	case err != nil:
		return StreamResult{State: Failed, Err: err}
	}
	r := StreamResult{Stream: name}
	s, err := js.Stream(ctx, name)
	if err != nil {
		r.State, r.Err = Failed, err
		return r
	}
	r.Info = s.CachedInfo()
	if read.Stream != "" && name == read.Stream && (read.Subject == "" || subj.Within(subject, read.Subject)) {
		r.State, r.Err = Failed, ErrReadBack
		return r
	}
	r.State = Exists
	return r
}

// createStream creates the stream sc describes, storing subject, with
// file storage and o's retention, duplicate window and replicas. A stream
// of that name that exists already fails (errors.Is
// jetstream.ErrStreamNameAlreadyInUse): it does not store subject, or it
// would have been found.
func createStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig, subject string, o StreamOptions) StreamResult {
	r := StreamResult{Stream: sc.Name}
	sc.Storage, sc.MaxAge, sc.Duplicates, sc.Replicas = jetstream.FileStorage, o.Retention, o.DuplicateWindow, max(o.Replicas, 1)
	s, err := js.CreateStream(ctx, sc)
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		r.State, r.Err = Failed, err
	case err != nil:
		r.State, r.Err = Failed, fmt.Errorf("could not create it for %s: %w", subject, err)
	default:
		r.State, r.Info = Created, s.CachedInfo()
	}
	return r
}

// PartitionedStreamServer is the first nats-server release whose streams
// take a subject transform (StreamConfig.SubjectTransform), which is what
// partitions a stream. An older server ignores the transform: it creates
// the stream unpartitioned, and nats.go then reports
// ErrStreamSubjectTransformNotSupported with the stream left behind.
const PartitionedStreamServer = "2.10.0"

// OldServerError is CheckPartitionedStreams' error: the server is older
// than PartitionedStreamServer.
type OldServerError struct {
	// Version is the server's, as it says.
	Version string
}

func (e *OldServerError) Error() string {
	return fmt.Sprintf("nats-server %s cannot partition a stream: that needs nats-server %s or later, whose streams take a subject transform", e.Version, PartitionedStreamServer)
}

// CheckPartitionedStreams returns an *OldServerError if the server nc is
// connected to is older than PartitionedStreamServer, so that a caller
// can refuse before it creates anything. It asks nothing of the server:
// the version is the one the server announced. A version it cannot read
// is let through: the stream's creation then tells.
func CheckPartitionedStreams(nc *natsgo.Conn) error {
	v := nc.ConnectedServerVersion()
	have, ok := parseServerVersion(v)
	need, _ := parseServerVersion(PartitionedStreamServer)
	if !ok || slices.Compare(have[:], need[:]) >= 0 {
		return nil
	}
	return &OldServerError{Version: v}
}

// parseServerVersion reads major.minor.patch from the start of a server's
// version, such as 2.9.10 or 2.10.0-beta.1 (a pre-release counts as its
// release).
func parseServerVersion(v string) (mmp [3]int, ok bool) {
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return mmp, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return mmp, false
		}
		mmp[i] = n
	}
	return mmp, true
}

// StreamName names the stream ProvisionStreams makes for a published
// subject: the subject in capitals, dots (and anything else a stream name
// cannot hold) as underscores: sensors.predictions is stored in
// SENSORS_PREDICTIONS.
func StreamName(subject string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(".*> \t\r\n/\\", r) {
			return '_'
		}
		return r
	}, strings.ToUpper(subject))
}

// StoringStream returns the name of the stream that stores subject,
// without creating one. When none does, the error wraps
// jetstream.ErrStreamNotFound; any other error is the lookup's (a
// connection without permission for the JetStream API, say).
func StoringStream(ctx context.Context, nc *natsgo.Conn, subject string) (string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return "", fmt.Errorf("jetstream: the stream of %s: %w", subject, err)
	}
	return name, nil
}
