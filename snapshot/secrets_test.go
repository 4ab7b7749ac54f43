package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// Credentials as a user may put them in a store URL, though the store
// reads them from the environment. The secret key has '/' and '+' in it,
// as AWS secret keys do.
const (
	accessKeyID  = "AKIAIOSFODNN7EXAMPLE"
	secretKey    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	sessionToken = "FwoGZXIvYXdzEXAMPLETOKEN"
	signature    = "SIGNATUREEXAMPLE0123"
	password     = "ENDPOINTPASSWORD"
)

// secretPieces are what no error may show: each credential, and each
// piece of the secret key between the characters URLs escape.
var secretPieces = []string{accessKeyID, secretKey, "wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY", sessionToken, signature, password}

// checkHidden fails t if err shows a credential.
func checkHidden(t *testing.T, what string, err error) {
	t.Helper()
	for _, s := range secretPieces {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error shows %q: %v", what, s, err)
		}
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestOpenStoreHidesCredentials opens stores that cannot be opened with
// credentials in their URLs: the error names the store by its redacted
// URL, and shows no credential, whatever the driver's error quotes.
func TestOpenStoreHidesCredentials(t *testing.T) {
	srv := s3test.Start(t)
	creds := "access_key_id=" + accessKeyID + "&secret_access_key=" + secretKey + "&session_token=" + sessionToken
	down := "endpoint=http://" + closedAddr(t) + "&region=us-east-1&use_path_style=true"
	cases := []struct{ name, url, shows string }{
		{"credentials in the query", "s3://" + srv.Bucket + "/prod?" + srv.Query() + "&" + creds, srv.Bucket},
		{"credentials escaped in the query", "s3://" + srv.Bucket + "/prod?" + srv.Query() +
			"&secret_access_key=" + url.QueryEscape(secretKey) + "&x-amz-security-token=" + sessionToken, srv.Bucket},
		{"server unreachable", "s3://models/prod?" + down + "&" + creds, "models"},
		{"bucket missing", "s3://missing/prod?" + srv.Query() + "&" + creds, "missing"},
		{"a bad parameter", "s3://models?dualstack=maybe&" + creds, "models"},
		{"a password in the endpoint", "s3://models?region=us-east-1&fips=maybe&endpoint=http://alice:" + password + "@" + closedAddr(t), "alice"},
		{"user info that does not parse", "s3://" + accessKeyID + ":" + secretKey + "@models/prod?" + down, "endpoint"},
		{"user info that parses badly", "s3://" + accessKeyID + ":1234/" + secretKey + "@models?region=us-east-1&profile=none&" + creds, "region"},
		{"a signature", "azblob://container?storage_account=acct&sig=" + signature + "&se=2030-01-01", "container"},
		{"a token for a directory", "file://" + t.TempDir() + "?token=" + sessionToken, "file://"},
		{"a password for memory", "mem://alice:" + password + "@?password=" + password, "mem://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := snapshot.OpenStore(ctx, c.url)
			if err == nil {
				s.Close()
				t.Fatalf("%s opened", redact.URLs(c.url))
			}
			checkHidden(t, "OpenStore", err)
			if msg := err.Error(); !strings.Contains(msg, "snapshot store ") || !strings.Contains(msg, c.shows) || !strings.Contains(msg, redact.Text) {
				t.Errorf("the error does not show the store's URL redacted (%s, %s): %v", c.shows, redact.Text, err)
			}
			_, err = snapshot.LoadURL(ctx, strings.Replace(c.url, "?", "/clicks?", 1), nil)
			if err == nil {
				t.Fatal("LoadURL loaded")
			}
			checkHidden(t, "LoadURL", err)
		})
	}
}

// storeOps calls every method of a store that returns an error, on a
// store none of whose calls can succeed.
var storeOps = map[string]func(t *testing.T, ctx context.Context, s *snapshot.Store) error{
	"Write": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Write(ctx, generation(t, "clicks", 1))
	},
	"Latest": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.Latest(ctx, "clicks", nil)
		return err
	},
	"Load": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.Load(ctx, "clicks", 1)
		return err
	},
	"Generations": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.Generations(ctx, "clicks")
		return err
	},
	"Retain": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Retain(ctx, "clicks", 1)
	},
	"CreateIfAbsent": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.CreateIfAbsent(ctx, snapshot.ModelDir(s.Prefix(), "clicks")+"epochs/x", []byte("x"))
	},
	"ReadObject": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.ReadObject(ctx, snapshot.Key(s.Prefix(), "clicks", 1))
		return err
	},
	"ObjectExists": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.ObjectExists(ctx, snapshot.Key(s.Prefix(), "clicks", 1))
		return err
	},
	"ListDirs": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.ListDirs(ctx, snapshot.ModelDir(s.Prefix(), "clicks"))
		return err
	},
	"Delete": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Delete(ctx, snapshot.Key(s.Prefix(), "clicks", 1))
	},
	"DeleteAll": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.DeleteAll(ctx, snapshot.ModelDir(s.Prefix(), "clicks"))
	},
	// A caller's error that names a key.
	"Hide": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Hide(fmt.Errorf("object %s: %w", snapshot.Key(s.Prefix(), "clicks", 1), errors.New("refused")))
	},
}

// TestStoreErrorsHideCredentials uses stores that open with credentials
// in their URLs, on a server that refuses every request: no error of any
// method shows a credential, on the store or on a Sub of it, and the
// errors still wrap the driver's.
func TestStoreErrorsHideCredentials(t *testing.T) {
	// Every method that returns an error is called.
	methods := reflect.TypeFor[*snapshot.Store]()
	for i := range methods.NumMethod() {
		m := methods.Method(i).Type
		if m.NumOut() > 0 && m.Out(m.NumOut()-1) == reflect.TypeFor[error]() && storeOps[methods.Method(i).Name] == nil && methods.Method(i).Name != "Close" {
			t.Errorf("Store.%s returns an error, and this test does not call it", methods.Method(i).Name)
		}
	}

	srv := s3test.StartRefusing(t)
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	cases := []struct{ name, url string }{
		// The bucket takes the user info's host and port, and the key
		// prefix the rest of the password: the keys in the errors hold it.
		{"a password that parses as a port and a path", "s3://" + accessKeyID + ":1234/" + url.PathEscape(secretKey) + "@" + srv.Bucket + "?" + srv.Query()},
		{"user info", "s3://" + accessKeyID + ":" + url.PathEscape(secretKey) + "@" + srv.Bucket + "/prod?" + srv.Query()},
		{"a password in the endpoint", "s3://" + srv.Bucket + "/prod?region=us-east-1&use_path_style=true&endpoint=" +
			url.QueryEscape("http://alice:"+password+"@"+host)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := snapshot.OpenStore(ctx, c.url)
			if err != nil {
				t.Fatal(err)
			}
			for name, store := range map[string]*snapshot.Store{"store": s, "sub": s.Sub("clicks/partition/kafka.clicks.0")} {
				for op, call := range storeOps {
					err := call(t, ctx, store)
					if err == nil {
						t.Errorf("%s.%s succeeded on a server that refuses every request", name, op)
						continue
					}
					checkHidden(t, name+"."+op, err)
				}
			}
			_, err = s.Load(ctx, "clicks", 1)
			if code := gcerrors.Code(err); code != gcerrors.PermissionDenied {
				t.Errorf("Load: the error's code is %v, want %v (the driver's error is still wrapped): %v", code, gcerrors.PermissionDenied, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			_, err = snapshot.LoadURL(ctx, strings.Replace(c.url, "?", "/clicks?", 1), nil)
			if err == nil {
				t.Fatal("LoadURL loaded")
			}
			checkHidden(t, "LoadURL", err)
		})
	}
}
