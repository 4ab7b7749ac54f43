package config

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
)

// redactedText stands for a secret, or the credentials in a URL, wherever
// the configuration is shown.
const redactedText = "[redacted]"

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
					v.Index(i).SetString(redactURLs(v.Index(i).String()))
				}
			} else {
				v.SetString(redactURLs(v.String()))
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
// of them, with every credential in them hidden as Redacted hides those of
// URL-valued keys (see redactURLs): the form of a URL that an error
// message or a log may quote.
func RedactURL(s string) string { return redactURLs(s) }

// redactURLs is s, a URL, an address (host:port) or a comma-separated list
// of them, with every credential replaced by "[redacted]":
//
//   - user info: its password, keeping the user name to tell accounts
//     apart (nats://alice:[redacted]@host), or all of it when it has no
//     password, since NATS reads a lone user as a token
//     (nats://[redacted]@host);
//   - in the query, every parameter, name and value, except those
//     harmlessParam knows (region=eu-west-1 stays); a known one whose value
//     is a URL has that URL's credentials hidden in turn;
//   - the fragment, and a path with an '@' in it.
//
// It splits the text the way net/url does (fragment at the first '#',
// query at the first '?', path at the first '/' after "scheme://", user
// info up to the last '@' before it), without requiring that it parse:
// a URL that the clients reject is shown with its credentials hidden all
// the same. An '@' in the path, the fragment or a hidden query
// parameter, with none in the authority, is user info that split badly
// (a password with '/', '?' or '#' in it), so the authority is hidden
// too. A list element that follows a query and has no scheme may be the
// rest of a query value with a comma in it, and is hidden; so is an
// element followed by one with user info and no scheme (a password with a
// comma in it). Text with nothing to hide is returned unchanged.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	afterQuery, continued := false, false
	for i, p := range parts {
		switch {
		case afterQuery && !strings.Contains(p, "://"):
			if strings.TrimSpace(p) != "" {
				parts[i] = redactedText
			}
		case i+1 < len(parts) && !strings.Contains(parts[i+1], "://") && strings.Contains(parts[i+1], "@"):
			// The next element may be the rest of a password with a
			// comma in it, which begins in this one.
			scheme := ""
			if j := strings.Index(p, "://"); j > 0 && isScheme(strings.TrimSpace(p[:j])) {
				scheme = p[:j+3]
			}
			parts[i] = scheme + redactedText
			afterQuery, continued = strings.ContainsAny(p, "?#"), true
			continue
		default:
			parts[i], afterQuery = redactURL(p, continued)
		}
		continued = false
	}
	return strings.Join(parts, ",")
}

// redactURL is redactURLs for one element, and whether it had a query or a
// fragment. With allUserInfo, the user name is hidden too: the element
// continues the previous one, so all of its user info may be password.
func redactURL(s string, allUserInfo bool) (string, bool) {
	body := strings.TrimSpace(s)
	if body == "" {
		return s, false
	}
	lead := s[:strings.Index(s, body)]
	trail := s[len(lead)+len(body):]

	body, frag, hasFrag := strings.Cut(body, "#")
	body, query, hasQuery := strings.Cut(body, "?")
	scheme := ""
	if i := strings.Index(body, "://"); i > 0 && isScheme(body[:i]) {
		scheme, body = body[:i+3], body[i+3:]
	}
	authority, path := body, ""
	if i := strings.IndexByte(body, '/'); i >= 0 {
		authority, path = body[:i], body[i:]
	}
	query, atInQuery := redactQuery(query)
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if user, _, hasPassword := strings.Cut(authority[:at], ":"); hasPassword && !allUserInfo {
			authority = user + ":" + redactedText + authority[at:]
		} else {
			authority = redactedText + authority[at:]
		}
	} else if strings.Contains(path, "@") || atInQuery || strings.Contains(frag, "@") {
		authority = redactedText
	}
	if strings.Contains(path, "@") {
		path = "/" + redactedText
	}
	out := lead + scheme + authority + path
	if hasQuery {
		out += "?" + query
	}
	if hasFrag {
		out += "#"
		if frag != "" {
			out += redactedText
		}
	}
	return out + trail, hasQuery || hasFrag
}

// redactQuery is redactURLs for a raw query, name=value pairs separated
// by '&', and whether a parameter it hid had an '@' in it.
func redactQuery(q string) (string, bool) {
	params := strings.Split(q, "&")
	at := false
	for i, p := range params {
		if p == "" {
			continue
		}
		name, value, _ := strings.Cut(p, "=")
		n, err := url.QueryUnescape(name)
		if err != nil || !harmlessParam(n) {
			params[i] = redactedText
			at = at || strings.Contains(p, "@")
			continue
		}
		if !strings.ContainsAny(value, "@%") && !strings.Contains(value, "://") {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			params[i] = name + "=" + redactedText
			continue
		}
		if r := redactURLs(v); r != v {
			params[i] = name + "=" + r
		}
	}
	return strings.Join(params, "&"), at
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// harmlessParam reports whether the query parameter name of a store URL
// is known to carry no credential, so that its value is shown: this
// package's prefix and the documented parameters of the gocloud.dev
// drivers the snapshot store registers (s3blob with its AWS settings,
// gcsblob, azureblob, fileblob), none of which takes a credential in the
// URL. Any other parameter is hidden whole: an unknown one may be a token
// or a signature.
func harmlessParam(name string) bool {
	switch name {
	case "prefix",
		// s3blob and gocloud.dev/aws
		"region", "endpoint", "profile", "role", "anonymous", "hostname_immutable", "dualstack", "fips",
		"rate_limiter_capacity", "request_checksum_calculation", "response_checksum_validation", "awssdk",
		"ssetype", "kmskeyid", "accelerate", "use_path_style", "s3ForcePathStyle", "disable_https",
		// gcsblob
		"access_id", "private_key_path", "grpc", "zonal",
		// azureblob
		"domain", "protocol", "cdn", "localemu", "storage_account",
		// fileblob
		"create_dir", "dir_file_mode", "no_tmp_dir", "base_url", "secret_key_path", "metadata":
		return true
	}
	return false
}
