// Package redact hides credentials in URLs, wherever hyperplane shows
// one: the configuration, errors and logs.
package redact

import (
	"net/url"
	"strings"
)

// Text stands for what was hidden.
const Text = "[redacted]"

// URLs is s, a URL, an address (host:port) or a comma-separated list
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
func URLs(s string) string {
	var h hider
	return h.urls(s)
}

// hider hides credentials, and keeps what it hid.
type hider struct{ hidden []string }

// hide keeps the non-empty parts of something hidden and returns what
// stands for it.
func (h *hider) hide(parts ...string) string {
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			h.hidden = append(h.hidden, p)
		}
	}
	return Text
}

func (h *hider) urls(s string) string {
	parts := strings.Split(s, ",")
	afterQuery, continued := false, false
	begun := "" // the part of a password before a comma, in the previous element
	for i, p := range parts {
		switch {
		case afterQuery && !strings.Contains(p, "://"):
			if strings.TrimSpace(p) != "" {
				parts[i] = h.hide(p)
			}
		case i+1 < len(parts) && !strings.Contains(parts[i+1], "://") && strings.Contains(parts[i+1], "@"):
			// The next element may be the rest of a password with a
			// comma in it, which begins in this one.
			scheme := ""
			if j := strings.Index(p, "://"); j > 0 && isScheme(strings.TrimSpace(p[:j])) {
				scheme = p[:j+3]
			}
			userinfo := p[len(scheme):]
			parts[i] = scheme + h.hide(userinfo)
			// The password begins after the user name; the part of it
			// here, and the whole of it across the comma, are secrets
			// of their own (a library may quote it decoded).
			begun = userinfo
			if _, password, ok := strings.Cut(userinfo, ":"); ok {
				begun = password
				h.hide(password)
			}
			afterQuery, continued = strings.ContainsAny(p, "?#"), true
			continue
		default:
			if continued {
				if rest, _, ok := strings.Cut(strings.TrimSpace(p), "@"); ok {
					h.hide(begun + "," + rest)
				}
			}
			parts[i], afterQuery = h.redactURL(p, continued)
		}
		continued, begun = false, ""
	}
	return strings.Join(parts, ",")
}

// redactURL is URLs for one element, and whether it had a query or a
// fragment. With allUserInfo, the user name is hidden too: the element
// continues the previous one, so all of its user info may be password.
func (h *hider) redactURL(s string, allUserInfo bool) (string, bool) {
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
	query, atInQuery := h.redactQuery(query)
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if user, password, hasPassword := strings.Cut(authority[:at], ":"); hasPassword && !allUserInfo {
			authority = user + ":" + h.hide(password) + authority[at:]
		} else {
			authority = h.hide(authority[:at]) + authority[at:]
		}
	} else if strings.Contains(path, "@") || atInQuery || strings.Contains(frag, "@") {
		// The password begins after the authority's ':', if it has one.
		_, password, _ := strings.Cut(authority, ":")
		authority = h.hide(authority, password)
	}
	if at := strings.LastIndexByte(path, '@'); at >= 0 {
		// The password may end before the '@', and keys built on the
		// path show it without its slashes.
		path = "/" + h.hide(path, strings.Trim(path, "/"), strings.Trim(path[:at], "/"))
	}
	out := lead + scheme + authority + path
	if hasQuery {
		out += "?" + query
	}
	if hasFrag {
		out += "#"
		if frag != "" {
			out += h.hide(frag)
		}
	}
	return out + trail, hasQuery || hasFrag
}

// redactQuery is URLs for a raw query, name=value pairs separated
// by '&', and whether a parameter it hid had an '@' in it.
func (h *hider) redactQuery(q string) (string, bool) {
	params := strings.Split(q, "&")
	at := false
	for i, p := range params {
		if p == "" {
			continue
		}
		name, value, _ := strings.Cut(p, "=")
		n, err := url.QueryUnescape(name)
		if err != nil || !harmlessParam(n) {
			params[i] = h.hide(p, value)
			at = at || strings.Contains(p, "@")
			continue
		}
		if !strings.ContainsAny(value, "@%") && !strings.Contains(value, "://") {
			continue
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			params[i] = name + "=" + h.hide(value)
			continue
		}
		if r := h.urls(v); r != v {
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
// is known to carry no credential, so that its value is shown: the snapshot store's
// prefix and the documented parameters of the gocloud.dev
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
