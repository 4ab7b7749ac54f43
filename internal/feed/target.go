package feed

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/config"
)

// Target is where gen sends examples (its -to): a destination whose NATS
// subject may hold one * token, which each message's subject has its key
// in place of.
type Target struct {
	config.Destination // Topic holds the * token, if any
	keyed              bool
	prefix, suffix     string // the subject around the * token
	Keys               int    // example i's key is i mod Keys
}

// UnmarshalText reads a destination as config.Destination does, but for
// one * token allowed in a NATS subject. On an error t is unchanged.
func (t *Target) UnmarshalText(text []byte) error {
	s := string(text)
	kind, topic, _ := strings.Cut(s, ":")
	toks := strings.Split(topic, ".")
	star := -1
	for i, tok := range toks {
		if tok != "*" {
			continue
		}
		if star >= 0 {
			return fmt.Errorf("%q: one * token at most, the key", s)
		}
		star = i
	}
	var d config.Destination
	if star < 0 {
		if err := d.UnmarshalText(text); err != nil {
			return err
		}
		*t = Target{Destination: d}
		return nil
	}
	if k := config.Kind(kind); k != config.KindJetStream && k != config.KindNATS {
		return fmt.Errorf("%q: only a NATS subject takes a * token (Kafka partitions by the record key)", s)
	}
	toks[star] = "KEY" // a token that validates as the keys will
	if err := d.UnmarshalText([]byte(kind + ":" + strings.Join(toks, "."))); err != nil {
		return fmt.Errorf("%q, with KEY for its *: %w", s, err)
	}
	*t = Target{
		Destination: config.Destination{Kind: d.Kind, Topic: topic},
		keyed:       true,
		prefix:      strings.Join(toks[:star], "."),
		suffix:      strings.Join(toks[star+1:], "."),
	}
	return nil
}

// Subject is where example i goes: the topic, or the subject with the
// example's key for its * token.
func (t Target) Subject(i int) string {
	if !t.keyed {
		return t.Topic
	}
	key := strconv.Itoa(i % max(t.Keys, 1))
	s := key
	if t.prefix != "" {
		s = t.prefix + "." + s
	}
	if t.suffix != "" {
		s += "." + t.suffix
	}
	return s
}
