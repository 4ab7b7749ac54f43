package epochlog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// logOps calls every method of a log that returns an error, beside
// those of its store (package snapshot's tests call them), on a log none
// of whose calls can succeed.
var logOps = map[string]func(t *testing.T, ctx context.Context, l *epochlog.Log) error{
	"CreateBoundary": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, _, err := l.CreateBoundary(ctx, boundary(t, "clicks", 1, "worker-a"))
		return err
	},
	"Boundary": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, _, err := l.Boundary(ctx, "clicks", 1)
		return err
	},
	"WrittenDigest": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, _, err := l.WrittenDigest(ctx, "clicks", nil)
		return err
	},
	"WriteShard": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		b := boundary(t, "clicks", 1, "worker-a")
		return l.WriteShard(ctx, shardResult(t, b, storetest.Digest("boundary"), shardid.Kafka("clicks", 0), "worker-a"), baseOf(t, b))
	},
	"Shard": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, err := l.Shard(ctx, "clicks", 1, shardid.Kafka("clicks", 0), epochlog.NewBase(baseState(t, "clicks", 1)))
		return err
	},
	"ShardExists": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, err := l.ShardExists(ctx, "clicks", 1, shardid.Kafka("clicks", 0))
		return err
	},
	"Epochs": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		_, err := l.Epochs(ctx, "clicks")
		return err
	},
	"RetainLog": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		return l.RetainLog(ctx, "clicks", 2, 1)
	},
	"Retain": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		return l.Retain(ctx, "clicks", 1)
	},
	"ProbeConditionalCreate": func(t *testing.T, ctx context.Context, l *epochlog.Log) error {
		return l.ProbeConditionalCreate(ctx, "clicks", "worker-a")
	},
}

// TestLogErrorsHideCredentials uses logs in stores that open with
// credentials in their URLs, on a server that refuses every request: no
// error of any method shows a credential, on the store or on a Sub of it.
func TestLogErrorsHideCredentials(t *testing.T) {
	// Every method that returns an error is called.
	store := reflect.TypeFor[*snapshot.Store]()
	methods := reflect.TypeFor[*epochlog.Log]()
	for i := range methods.NumMethod() {
		m := methods.Method(i)
		_, ofStore := store.MethodByName(m.Name)
		if m.Type.NumOut() > 0 && m.Type.Out(m.Type.NumOut()-1) == reflect.TypeFor[error]() && logOps[m.Name] == nil && (!ofStore || m.Name == "Retain") {
			t.Errorf("Log.%s returns an error, and this test does not call it", m.Name)
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
			defer s.Close()
			for name, l := range map[string]*epochlog.Log{"log": epochlog.New(s), "sub": epochlog.New(s.Sub("clicks/partition/kafka.clicks.0"))} {
				for op, call := range logOps {
					err := call(t, ctx, l)
					if err == nil {
						t.Errorf("%s.%s succeeded on a server that refuses every request", name, op)
						continue
					}
					storetest.CheckHidden(t, name+"."+op, err)
				}
			}
		})
	}
}

// TestFatal: the errors no retry mends, the epoch log's and the
// store's.
func TestFatal(t *testing.T) {
	for _, tc := range []struct {
		err   error
		fatal bool
	}{
		{nil, false},
		{errors.New("store unreachable"), false},
		{snapshot.ErrFenced, true},
		{errors.Join(errors.New("wrapped"), snapshot.ErrInvalidState), true},
		{fmt.Errorf("epoch log: %w", epochlog.ErrOtherHistory), true},
		{fmt.Errorf("epoch log: %w", epochlog.ErrDamagedLog), true},
		{fmt.Errorf("probe: %w", epochlog.ErrNoConditionalCreate), true},
		{fmt.Errorf("epoch log: %w", snapshot.ErrNotFound), false},
		{snapshot.ErrCorrupt, false},
	} {
		if got := epochlog.Fatal(tc.err); got != tc.fatal {
			t.Errorf("Fatal(%v) = %v, want %v", tc.err, got, tc.fatal)
		}
	}
}
