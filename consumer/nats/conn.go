// Package nats connects the worker to NATS: a source and a sink for
// JetStream, where positions are stream sequences and reading can resume
// exactly where a snapshot left off, and a source and a sink for core NATS,
// which keeps nothing and is therefore at-most-once.
//
// Positions. A JetStream message is at {Source: "jetstream:<stream>",
// Offset: its stream sequence}, and its Resume value is that same sequence:
// the worker records the last sequence the model includes, and a source
// opened with it starts at the sequence after. A core NATS message has no
// place in any log; it is numbered from 1 in the order this process received
// it, under "nats:<subject>", and the numbers mean nothing to another
// process.
//
// Shards. A stream whose subject transform partitions its subjects
// (ex.* → ex.{{partition(N,1)}}.{{wildcard(1)}}) is N shards of the epoch
// protocol, JetStreamShards: "jetstream:<stream>#<k>", each read alone
// with a filter on its partition. Positions are stream sequences there
// too, and a shard's messages are under the shard's name.
//
// Acknowledgements. Neither source acknowledges anything to the server: the
// JetStream source reads with an ordered consumer (ephemeral, no acks), so
// the position lives only in the worker's snapshots, which is what makes the
// model exactly-once. The sinks are at-least-once: the JetStream sink returns
// nil only when the stream acknowledged every message, and each message
// carries its event id in the Nats-Msg-Id header, so a batch published again
// after an error is stored once within the stream's duplicate window.
//
// Provisioning. ProvisionStreams creates the streams a worker needs that
// are missing, and says of those that exist whether they fit; it never
// changes one.
package nats

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// Config says how to reach and authenticate to NATS.
type Config struct {
	// URL is one server URL or several, comma-separated
	// (nats://host:4222,nats://other:4222).
	URL string
	// CredentialsFile is a user JWT and NKey seed (.creds) file.
	CredentialsFile string
	// NKeyFile is a file holding an NKey user seed.
	NKeyFile string
	// TLS, when set, is used for every connection (and required).
	TLS *tls.Config
	// Name is the connection name the server shows in its monitoring.
	Name string
}

// Connect dials NATS. The first connection must succeed (an error names the
// servers, with the credentials in the URLs redacted); after that the connection
// reconnects forever, backing off from 100ms to 2s between rounds over the
// servers, and logs each disconnect, reconnect and asynchronous error (such
// as a slow consumer dropping core NATS messages). While it is
// reconnecting, publishes fail at once and the sources wait: the client
// buffers nothing to send when it reconnects, since a server that came
// back with a smaller max_payload closes the connection for good on a
// buffered message over it, and the callers publish again anyway. The
// caller owns the connection and closes it after the sources and sinks
// that use it. Nothing is logged once Close has returned: nats.go runs its
// handlers on a goroutine of its own, so the connection's close is the
// caller's to report.
func Connect(cfg Config, log *zap.Logger) (*natsgo.Conn, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, errors.New("nats: no server URL")
	}
	servers := redact.URLs(cfg.URL)
	opts := []natsgo.Option{
		natsgo.Name(cfg.Name),
		natsgo.MaxReconnects(-1),
		natsgo.CustomReconnectDelay(reconnectDelay),
		natsgo.ReconnectBufSize(-1),
		natsgo.DisconnectErrHandler(func(nc *natsgo.Conn, err error) {
			if nc.IsClosed() {
				return // closed on purpose, by its owner
			}
			log.Warn("nats disconnected", zap.String("servers", servers), zap.Error(err))
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			log.Info("nats reconnected", zap.String("server", redact.URLs(nc.ConnectedUrl())))
		}),
		natsgo.ErrorHandler(func(nc *natsgo.Conn, sub *natsgo.Subscription, err error) {
			fields := []zap.Field{zap.Error(err)}
			if sub != nil {
				fields = append(fields, zap.String("subject", sub.Subject))
			}
			log.Error("nats asynchronous error", fields...)
		}),
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(cfg.CredentialsFile))
	}
	if cfg.NKeyFile != "" {
		opt, err := natsgo.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey file %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, opt)
	}
	if cfg.TLS != nil {
		opts = append(opts, natsgo.Secure(cfg.TLS))
	}
	nc, err := natsgo.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", servers, err)
	}
	return nc, nil
}

// The pause after each unsuccessful round over the servers: reconnectMin
// doubling to reconnectMax, so a restarted server is found again quickly
// without a tight loop during a long outage.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 2 * time.Second
)

// reconnectDelay is the pause after the given number of unsuccessful
// rounds over the servers.
func reconnectDelay(rounds int) time.Duration {
	bo := retry.Backoff{Min: reconnectMin, Max: reconnectMax}
	return bo.Delay(rounds)
}
