package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

func TestSecretsHide(t *testing.T) {
	const store = "s3://models/prod?region=eu-west-1&access_key_id=AKIAEXAMPLE&secret_access_key=wJalr/K7+MDENG%3D&session_token=FQoGZXIv"
	secrets := []string{"AKIAEXAMPLE", "wJalr", "K7+MDENG", "K7 MDENG", "MDENG", "FQoGZXIv"}
	parsed, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	reencoded := *parsed
	reencoded.RawQuery = parsed.Query().Encode() // as a library may write it back
	cases := []struct {
		name, urls, text string
		want             string // "" when only the secrets' absence is checked
	}{
		{"the URL as given", store, "open bucket " + store + ": unknown query parameter",
			"open bucket s3://models/prod?region=eu-west-1&[redacted]&[redacted]&[redacted]: unknown query parameter"},
		{"the URL re-encoded", store, "open bucket " + reencoded.String() + ": bad", ""},
		{"the URL quoted", store, fmt.Sprintf("parse %q: bad", store+"\t"), ""},
		{"a credential alone, decoded", store, "the key wJalr/K7 MDENG= was refused", "the key [redacted] was refused"},
		{"a credential alone, as written", store, "token FQoGZXIv expired", "token [redacted] expired"},
		{"a password", "nats://alice:p%40ss/w0rd@n:4222", "dial nats://alice:p%40ss%2Fw0rd@n:4222 and p@ss/w0rd", ""},
		{"a password split into the path", "s3://AKIAEXAMPLE:1234/wJalr@models?region=eu", "snapshot wJalr@models/clicks/1.msgpack: denied",
			"snapshot [redacted]/clicks/1.msgpack: denied"},
		{"a password in a parameter's URL", "s3://b?endpoint=http://alice:K7MDENG@minio:9000", "Get http://alice:K7MDENG@minio:9000/b: refused",
			"Get http://alice:[redacted]@minio:9000/b: refused"},
		{"a password with a comma, decoded", "s3://AKIAEXAMPLE:wJa,lrK7@models", "open bucket with key wJa,lrK7: denied",
			"open bucket with key [redacted]: denied"},
		{"a password with a comma, in part", "s3://AKIAEXAMPLE:wJa,lrK7@models", "the secret begins wJa and ends lrK7", ""},
		{"nothing to hide", "s3://models/prod?region=eu-west-1", "open s3://models/prod?region=eu-west-1: 1 error",
			"open s3://models/prod?region=eu-west-1: 1 error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SecretsIn(c.urls).Hide(c.text)
			if c.want != "" && got != c.want {
				t.Errorf("Hide(%q)\n= %q\nwant %q", c.text, got, c.want)
			}
			for _, s := range append(secrets, "p@ss", "w0rd", "p%40ss", "K7MDENG", "wJa", "lrK7") {
				if strings.Contains(got, s) {
					t.Errorf("Hide(%q) = %q shows %q", c.text, got, s)
				}
			}
		})
	}
	if got := (*Secrets)(nil).Hide("x"); got != "x" {
		t.Errorf("nil Secrets hid %q as %q", "x", got)
	}
}

func TestSecretsHideError(t *testing.T) {
	secrets := SecretsIn("s3://b?token=S3CRET")
	cause := &fs.PathError{Op: "open", Path: "S3CRET", Err: fs.ErrNotExist}
	err := secrets.HideError(fmt.Errorf("snapshot store s3://b?token=S3CRET: %w", cause))
	if got, want := err.Error(), "snapshot store s3://b?[redacted]: open [redacted]: file does not exist"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is does not find the error it wraps")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe != cause {
		t.Error("errors.As does not find the error it wraps")
	}
	if wrapped := fmt.Errorf("run: %w", err); strings.Contains(wrapped.Error(), "S3CRET") {
		t.Errorf("wrapped again, it shows the secret: %v", wrapped)
	}
	plain := errors.New("nothing to hide")
	if got := secrets.HideError(plain); got != plain {
		t.Errorf("HideError(%v) = %#v, want the error itself", plain, got)
	}
	if secrets.HideError(nil) != nil {
		t.Error("HideError(nil) is not nil")
	}
}
