package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// TestOpenStoreHidesCredentials opens stores that cannot be opened with
// credentials in their URLs: the error names the store by its redacted
// URL, and shows no credential, whatever the driver's error quotes.
func TestOpenStoreHidesCredentials(t *testing.T) {
	srv := s3test.Start(t)
	creds := "access_key_id=" + storetest.AccessKeyID + "&secret_access_key=" + storetest.SecretKey + "&session_token=" + storetest.SessionToken
	down := "endpoint=http://" + s3test.ClosedAddr(t) + "&region=us-east-1&use_path_style=true"
	cases := []struct{ name, url, shows string }{
		{"credentials in the query", "s3://" + srv.Bucket + "/prod?" + srv.Query() + "&" + creds, srv.Bucket},
		{"credentials escaped in the query", "s3://" + srv.Bucket + "/prod?" + srv.Query() +
			"&secret_access_key=" + url.QueryEscape(storetest.SecretKey) + "&x-amz-security-token=" + storetest.SessionToken, srv.Bucket},
		{"server unreachable", "s3://models/prod?" + down + "&" + creds, "models"},
		{"bucket missing", "s3://missing/prod?" + srv.Query() + "&" + creds, "missing"},
		{"a bad parameter", "s3://models?dualstack=maybe&" + creds, "models"},
		{"a password in the endpoint", "s3://models?region=us-east-1&fips=maybe&endpoint=http://alice:" + storetest.Password + "@" + s3test.ClosedAddr(t), "alice"},
		{"user info that does not parse", "s3://" + storetest.AccessKeyID + ":" + storetest.SecretKey + "@models/prod?" + down, "endpoint"},
		{"user info that parses badly", "s3://" + storetest.AccessKeyID + ":1234/" + storetest.SecretKey + "@models?region=us-east-1&profile=none&" + creds, "region"},
		{"a signature", "azblob://container?storage_account=acct&sig=" + storetest.Signature + "&se=2030-01-01", "container"},
		{"a token for a directory", "file://" + t.TempDir() + "?token=" + storetest.SessionToken, "file://"},
		{"a password for memory", "mem://alice:" + storetest.Password + "@?password=" + storetest.Password, "mem://"},
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
			storetest.CheckHidden(t, "OpenStore", err)
			if msg := err.Error(); !strings.Contains(msg, "snapshot store ") || !strings.Contains(msg, c.shows) || !strings.Contains(msg, redact.Text) {
				t.Errorf("the error does not show the store's URL redacted (%s, %s): %v", c.shows, redact.Text, err)
			}
			_, err = snapshot.LoadURL(ctx, strings.Replace(c.url, "?", "/clicks?", 1), nil)
			if err == nil {
				t.Fatal("LoadURL loaded")
			}
			storetest.CheckHidden(t, "LoadURL", err)
		})
	}
}

// storeOps calls every method of a store that returns an error, on a
// store none of whose calls can succeed.
var storeOps = map[string]func(t *testing.T, ctx context.Context, s *snapshot.Store) error{
	"Write": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Write(ctx, storetest.Generation(t, "clicks", 1))
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
	"ReplaceDamaged": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.ReplaceDamaged(ctx, snapshot.Key(s.Prefix(), "clicks", 1), []byte("damaged"), []byte("data"))
		return err
	},
	"Delete": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.Delete(ctx, snapshot.Key(s.Prefix(), "clicks", 1))
	},
	"DeleteAll": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.DeleteAll(ctx, snapshot.ModelDir(s.Prefix(), "clicks"))
	},
	"LoadPartition": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.LoadPartition(ctx, "clicks", shardid.Kafka("clicks", 0), 1)
		return err
	},
	"PartitionShards": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.PartitionShards(ctx, "clicks")
		return err
	},
	"PartitionChain": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		chain, err := s.PartitionChain("clicks", shardid.Kafka("clicks", 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = chain.Load(ctx, "clicks", 1)
		return err
	},
	"RequestPromotion": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		return s.RequestPromotion(ctx, "clicks", snapshot.NewPromotionRequest("seed", time.Now()))
	},
	"PromotionRequest": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.PromotionRequest(ctx, "clicks")
		return err
	},
	"Promotions": func(t *testing.T, ctx context.Context, s *snapshot.Store) error {
		_, err := s.Promotions(ctx, "clicks", shardid.ID{})
		return err
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
	for _, c := range storetest.CredentialURLs(srv) {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := snapshot.OpenStore(ctx, c.URL)
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
					storetest.CheckHidden(t, name+"."+op, err)
				}
			}
			_, err = s.Load(ctx, "clicks", 1)
			if code := gcerrors.Code(err); code != gcerrors.PermissionDenied {
				t.Errorf("Load: the error's code is %v, want %v (the driver's error is still wrapped): %v", code, gcerrors.PermissionDenied, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			_, err = snapshot.LoadURL(ctx, strings.Replace(c.URL, "?", "/clicks?", 1), nil)
			if err == nil {
				t.Fatal("LoadURL loaded")
			}
			storetest.CheckHidden(t, "LoadURL", err)
		})
	}
}
