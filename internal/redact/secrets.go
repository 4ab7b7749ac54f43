package redact

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Secrets are the credentials of some URLs, to be hidden from text that
// did not come through URLs: the errors of a library that was given the
// URL, which may quote it whole, re-encoded, or quote a piece of it.
type Secrets struct {
	r *strings.Replacer
}

// SecretsIn collects the credentials that URLs hides in each of urls. In
// text, each of the URLs is replaced by URLs of it, and then every
// credential in it by "[redacted]": as it is written in the URL, decoded,
// and encoded again as net/url writes a query, a path or user info, each
// of those also as Go quotes it (%q). A credential of a few characters is
// hidden wherever those characters show, so a text may lose more than
// the credential; it never keeps it.
func SecretsIn(urls ...string) *Secrets {
	var whole []string // the URLs, as given and as quoted
	shown := map[string]string{}
	var h hider
	for _, u := range urls {
		r := h.urls(u)
		if r == u {
			continue
		}
		for _, form := range []string{u, quoted(u)} {
			if _, ok := shown[form]; !ok {
				shown[form] = r
				whole = append(whole, form)
			}
		}
	}
	var parts []string
	seen := map[string]bool{}
	for _, s := range h.hidden {
		for _, form := range forms(s) {
			if form != "" && !seen[form] {
				seen[form] = true
				parts = append(parts, form)
			}
		}
	}
	if len(whole) == 0 && len(parts) == 0 {
		return &Secrets{}
	}
	longestFirst := func(a, b string) int { return cmp.Compare(len(b), len(a)) }
	slices.SortStableFunc(whole, longestFirst)
	slices.SortStableFunc(parts, longestFirst)
	// A strings.Replacer tries its pairs in order at each position: a
	// whole URL before any credential in it, a longer credential before
	// a shorter one it holds. It does not look again at what it wrote, so
	// a URL is replaced by its redacted form with the credentials that
	// another of the URLs shows hidden too (the user info of
	// s3://id:1234/secret@bucket, which has no '@' without its path).
	var pairs []string
	for _, p := range parts {
		pairs = append(pairs, p, Text)
	}
	credentials := strings.NewReplacer(pairs...)
	pairs = nil
	for _, u := range whole {
		pairs = append(pairs, u, credentials.Replace(shown[u]))
	}
	for _, p := range parts {
		pairs = append(pairs, p, Text)
	}
	return &Secrets{strings.NewReplacer(pairs...)}
}

// forms are the ways a library may write a credential s found in a URL.
func forms(s string) []string {
	plain := []string{s}
	if d, err := url.QueryUnescape(s); err == nil {
		plain = append(plain, d)
	}
	if d, err := url.PathUnescape(s); err == nil {
		plain = append(plain, d)
	}
	var out []string
	for _, p := range plain {
		user := url.UserPassword("", p).String() // ":" then p, escaped
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p), user[1:])
	}
	n := len(out)
	for _, f := range out[:n] {
		out = append(out, quoted(f))
	}
	return out
}

// quoted is s as it shows between the quotes of %q.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Hide is text with the secrets hidden.
func (s *Secrets) Hide(text string) string {
	if s == nil || s.r == nil {
		return text
	}
	return s.r.Replace(text)
}

// HideError is err with the secrets hidden from its text. It wraps err,
// so errors.Is and errors.As find what err wraps; only Error() changes,
// and an error that errors.As finds inside it still has its own text.
// nil, and an error with nothing to hide, are returned as they are.
func (s *Secrets) HideError(err error) error {
	if err == nil || s == nil || s.r == nil {
		return err
	}
	msg := err.Error()
	if hidden := s.Hide(msg); hidden != msg {
		return &hiddenError{msg: hidden, err: err}
	}
	return err
}

type hiddenError struct {
	msg string
	err error
}

func (e *hiddenError) Error() string { return e.msg }
func (e *hiddenError) Unwrap() error { return e.err }
