package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the name of the NATS micro service; EndpointName that of
// its endpoint.
const (
	ServiceName  = "hyperplane"
	EndpointName = "predict"
)

// ServiceOptions configure the NATS interface.
type ServiceOptions struct {
	// Subject is the endpoint's subject: hyperplane.<model>.predict by
	// convention.
	Subject string
	// QueueGroup is the queue group the replicas share requests in.
	QueueGroup string
	// Version is the service's version: the binary's. The micro
	// conventions want SemVer: "v1.2.3" is given as 1.2.3, and a version
	// that is not SemVer, such as "dev", as 0.0.0-dev.
	Version string
}

// AddService starts the NATS micro service "hyperplane" on nc with the
// endpoint "predict" on opts.Subject, in opts.QueueGroup, answering as
// ServeHTTP does: the Content-Type header says msgpack, the header
// Hyperplane-Generation names a stored generation, and the reply carries
// Hyperplane-Model-Version. A refused request gets a micro error reply:
// the headers Nats-Service-Error-Code (the HTTP status, such as 400) and
// Nats-Service-Error (the reason). Its INFO, STATS and PING answer as the
// micro conventions say; STATS counts a refused request as an error.
//
// A service answers its requests one at a time, in the order they
// arrive, within the server's in-flight limit shared with HTTP; the
// replicas in the queue group answer in parallel. Stop the service before
// closing nc.
func (s *Server) AddService(nc *nats.Conn, opts ServiceOptions) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     semver(opts.Version),
		Description: "predictions of the live model " + s.opts.Model,
		Metadata:    map[string]string{"model": s.opts.Model},
		QueueGroup:  opts.QueueGroup,
	})
	if err != nil {
		return nil, fmt.Errorf("nats service: %w", err)
	}
	err = svc.AddEndpoint(EndpointName, micro.HandlerFunc(func(r micro.Request) { s.serveNATS(r, nc.MaxPayload()) }),
		micro.WithEndpointSubject(opts.Subject),
		micro.WithEndpointMetadata(map[string]string{"format": "json or msgpack (Content-Type: application/msgpack)"}))
	if err != nil {
		svc.Stop() //nolint:errcheck // the endpoint failed first
		return nil, fmt.Errorf("nats service: endpoint %s on %s: %w", EndpointName, opts.Subject, err)
	}
	return svc, nil
}

// serveNATS answers a request before it returns: micro counts the
// request in STATS when its handler returns, and as an error only if the
// error reply was sent by then.
func (s *Server) serveNATS(r micro.Request, maxPayload int64) {
	hs := r.Headers()
	msgpack := isMsgpack(headerValue(hs, "Content-Type"))
	generation, genErr := headerOnce(hs, "generation", GenerationHeader)
	shard, shardErr := headerOnce(hs, "shard", ShardHeader)
	// A reply over the server's max_payload (0: unknown) is not sent, and
	// the requester would only time out: it is refused with 413 instead.
	maxReply := 0
	if maxPayload > 0 {
		maxReply = max(1, int(maxPayload)-replyHeaderRoom-len(generation))
	}
	s.handle(context.Background(), "nats", func(_ context.Context, buf []byte) (request, []byte, error) {
		if err := cmp.Or(genErr, shardErr); err != nil {
			return request{}, buf, err
		}
		// The body is not copied: the message is this request's alone.
		return request{
			body:       r.Data(),
			msgpack:    msgpack,
			generation: generation,
			shard:      shard,
			maxReply:   maxReply,
		}, buf, nil
	}, func(a answer, err error) error {
		if err != nil {
			status := 500
			var e *Error
			if errors.As(err, &e) {
				status = e.Status
			}
			r.Error(strconv.Itoa(status), err.Error(), nil) //nolint:errcheck // the requester is gone; nothing to do
			return nil
		}
		h := micro.Headers{VersionHeader: []string{strconv.FormatUint(a.version, 10)}}
		if generation != "" {
			h[GenerationHeader] = []string{generation}
		}
		if msgpack {
			h["Content-Type"] = []string{ContentTypeMsgpack}
		}
		r.Respond(a.body, micro.WithHeaders(h)) //nolint:errcheck // as above
		return nil
	})
}

// replyHeaderRoom is room enough for the headers of a reply
// (Hyperplane-Model-Version, Content-Type and the NATS header line), the
// generation's value aside: NATS counts them in max_payload.
const replyHeaderRoom = 128

// headerValue is the first value of the header name in h, whatever the
// case of the name as sent: NATS keeps header names as the client wrote
// them, and clients other than nats.go's often write them in lower case.
// The name as given is looked up first; among other spellings, the one
// that sorts first.
func headerValue(h micro.Headers, name string) string {
	if v := nats.Header(h).Get(name); v != "" {
		return v
	}
	var key string
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) && (key == "" || k < key) {
			key = k
		}
	}
	if key == "" {
		return ""
	}
	return h[key][0]
}

// headerOnce is the value of the header name in h, whatever the case of
// the name as sent (as headerValue), that names the model's key: "" for
// none. Values that differ, under one spelling or several, are refused,
// as the HTTP server refuses them: answering from one would have another
// model answer than the one the other names.
func headerOnce(h micro.Headers, key, name string) (string, error) {
	// The name as given first, then the other spellings in order, so
	// that an error names the values in the same order every time.
	vals := slices.Clone(h[name])
	var others []string
	for k := range h {
		if k != name && strings.EqualFold(k, name) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	for _, k := range others {
		vals = append(vals, h[k]...)
	}
	return oneValue(key, name, vals)
}

// semver is v as a SemVer version: "v1.2.3" is 1.2.3, anything else that
// is not SemVer, such as "dev", is 0.0.0-dev.
func semver(v string) string {
	if s, ok := strings.CutPrefix(v, "v"); ok && semverRE.MatchString(s) {
		return s
	}
	if semverRE.MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}

// semverRE is the SemVer 2.0.0 grammar.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
