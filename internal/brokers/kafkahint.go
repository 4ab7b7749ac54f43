package brokers

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	kafkago "github.com/segmentio/kafka-go"
)

// KafkaCheck is what to check after a Kafka request failed with err, for
// the parenthesis of its error: the kafka.tls keys when TLS failed, the
// kafka.sasl keys when the brokers refused the credentials, both when a
// broker closed the connection (a TLS listener closes one without TLS, a
// broker that requires SASL one it did not authenticate, and neither says
// why); kafka.tls.enabled among others when the broker did not answer in
// time (a listener without TLS waits for the rest of what it takes for a
// request); else kafka.brokers, that the brokers are up, and then more,
// if not empty.
func KafkaCheck(err error, more string) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		kerr     kafkago.Error
		timeout  net.Error
	)
	switch {
	case errors.As(err, &hostname):
		return "check that kafka.brokers names the brokers by a name or address of their certificate"
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &verify):
		return "the brokers' certificate is not trusted: check kafka.tls.ca_file"
	case errors.As(err, &header):
		return "the broker does not answer in TLS: check kafka.tls.enabled and that kafka.brokers names the brokers' TLS listener"
	case errors.As(err, &alert):
		return "the broker refused the TLS handshake: check kafka.tls.cert_file and kafka.tls.key_file, which a broker that wants mutual TLS needs"
	case errors.As(err, &kerr) && (kerr == kafkago.SASLAuthenticationFailed || kerr == kafkago.UnsupportedSASLMechanism || kerr == kafkago.IllegalSASLState):
		return "the brokers refused the credentials: check kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.password"
	case errors.As(err, &kerr) && (kerr == kafkago.TopicAuthorizationFailed || kerr == kafkago.GroupAuthorizationFailed || kerr == kafkago.ClusterAuthorizationFailed):
		return "the brokers' ACLs do not allow this to kafka.sasl.username"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "the broker did not answer in time: check kafka.brokers, that the brokers are up and reachable, and, with " +
			"kafka.tls.enabled, that kafka.brokers names the brokers' TLS listener (a listener without TLS never answers a TLS handshake)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the broker closed the connection: check that the brokers are up, kafka.tls.enabled (a TLS listener closes a connection without TLS), " +
			"and kafka.sasl.mechanism, kafka.sasl.username and kafka.sasl.password (a broker that requires SASL closes a connection " +
			"whose credentials it refused, or that gave none)"
	}
	if more != "" {
		return "check kafka.brokers, that the brokers are up, and " + more
	}
	return "check kafka.brokers and that the brokers are up"
}
