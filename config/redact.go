package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// redactedText stands for a secret, or the credentials in a URL, wherever
// the configuration is shown.
const redactedText = redact.Text

// urlSecretNote ends the help of a key tagged secret:"url" in Usage.
const urlSecretNote = "(credentials in it are never shown)"

// Redacted is c with every secret that is set replaced by "[redacted]",
// and the credentials in every URL-valued key (secret:"url") hidden as
// redactURLs does: the form of the configuration to log or print.
func (c Config) Redacted() Config {
	root := reflect.ValueOf(&c).Elem()
	for _, k := range keys() {
		v := root.FieldByIndex(k.index)
		if v.Kind() == reflect.Slice && !v.IsNil() {
			// A copy, so that the result shares nothing with c.
			v.Set(reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()), v))
		}
		switch k.secret {
		case secretValue:
			if v.String() != "" {
				v.SetString(redactedText)
			}
		case secretInURLs:
			if v.Kind() == reflect.Slice {
				for i := range v.Len() {
					v.Index(i).SetString(redact.URLs(v.Index(i).String()))
				}
			} else {
				v.SetString(redact.URLs(v.String()))
			}
		}
	}
	return c
}

// String is the effective configuration on one line, "key=value" pairs in
// declaration order, secrets redacted: safe to log, and what fmt and zap
// show for a Config.
func (c Config) String() string {
	return c.pairs("")
}

// String shows the Kafka section as Config.String does, credentials
// hidden, so that printing the section alone does not leak them.
func (k Kafka) String() string { return Config{Kafka: k}.pairs("kafka.") }

// String shows the NATS section as Config.String does, credentials hidden.
func (n NATS) String() string { return Config{NATS: n}.pairs("nats.") }

// String shows the snapshot section as Config.String does, credentials
// hidden.
func (s Snapshot) String() string { return Config{Snapshot: s}.pairs("snapshot.") }

// pairs is String for the keys whose path starts with prefix.
func (c Config) pairs(prefix string) string {
	root := reflect.ValueOf(c.Redacted())
	var b strings.Builder
	for _, k := range keys() {
		if !strings.HasPrefix(k.path, prefix) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		text := formatText(root.FieldByIndex(k.index))
		if text == "" || strings.ContainsAny(text, " \t\n\"=") {
			text = fmt.Sprintf("%q", text)
		}
		b.WriteString(k.path + "=" + text)
	}
	return b.String()
}

// String shows the SASL settings with the password redacted, so that
// printing a Kafka section does not leak it.
func (s SASL) String() string {
	pw := ""
	if s.Password != "" {
		pw = redactedText
	}
	return fmt.Sprintf("{mechanism:%s username:%s password:%s}", s.Mechanism, s.Username, pw)
}

// RedactURL is s, a URL, an address (host:port) or a comma-separated list
// of them, with every credential in them hidden, as Redacted hides those
// of URL-valued keys: the form of a URL that an error message or a log
// may quote. See redact.URLs for what is hidden.
func RedactURL(s string) string { return redact.URLs(s) }
